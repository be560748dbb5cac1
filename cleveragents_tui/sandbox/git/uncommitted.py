"""What a git sandbox leaves out: the changes in the person's checkout not yet committed.

A git_worktree sandbox starts from the repository's last commit (docs/sandboxes.md), so
edits not committed, and new files not added, are not what the agent sees or what Apply
lands on. Read without writing anything in the repository (no optional locks: not even
the index's stat refresh), with the sandbox's fixed git configuration and environment.
"""

from __future__ import annotations

from dataclasses import dataclass

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.git.process import base_env
from cleveragents_tui.sandbox.git.repository import Repository


@dataclass(frozen=True)
class Uncommitted:
    changed: int  # tracked files modified, added, deleted or renamed
    untracked: int  # files git does not track (and does not ignore)


def uncommitted(resource: Resource) -> Uncommitted | None:
    """The checkout's changes not committed; None when it has none, or cannot be read (the
    sandbox, made next, names that problem itself)."""
    try:
        repository = Repository.find(resource, resource.resource_id, base_env())
        listed = repository.git.run(
            "--no-optional-locks", "status", "--porcelain=v1", "-z", fix="check the repository"
        )
    except SandboxError:
        return None
    changed = untracked = 0
    fields = iter(listed.split(b"\0"))
    for entry in fields:  # "XY path"; a rename or copy is followed by its source path
        status = entry[:2]
        if status == b"??":
            untracked += 1
        elif status:
            changed += 1
            if status[:1] in b"RC":
                next(fields, None)
    return Uncommitted(changed, untracked) if changed or untracked else None
