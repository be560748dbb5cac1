"""What a git sandbox leaves out: the changes in the person's checkout not yet committed.

A git_worktree sandbox starts from the repository's last commit (docs/sandboxes.md), so
edits not committed, and new files not added, are not what the agent sees or what Apply
lands on. Read without writing anything in the repository (no optional locks: not even
the index's stat refresh), with the sandbox's fixed git configuration and environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.git.process import base_env
from cleveragents_tui.sandbox.git.repository import Repository


@dataclass(frozen=True)
class Uncommitted:
    changed: int  # tracked files modified, added, deleted or renamed
    untracked: int  # files git does not track (and does not ignore)


def uncommitted(resource: Resource, apart: Iterable[Path] = ()) -> Uncommitted | None:
    """The checkout's changes not committed; None when it has none, or cannot be read (the
    sandbox, made next, names that problem itself). New files at or under a path of
    ``apart`` are not counted: they are resources of their own (a database file)."""
    try:
        repository = Repository.find(resource, resource.resource_id, base_env())
        listed = repository.git.run(
            "--no-optional-locks", "status", "--porcelain=v1", "-z", fix="check the repository"
        )
    except SandboxError:
        return None
    inside = (_relative(repository.location, Path(p)) for p in apart)
    resources = [p for p in inside if p is not None]
    changed = untracked = 0
    fields = iter(listed.split(b"\0"))
    for entry in fields:  # "XY path"; a rename or copy is followed by its source path
        status = entry[:2]
        if status == b"??":
            path = PurePosixPath(os.fsdecode(entry[3:]).rstrip("/"))
            if not any(path == r or r in path.parents for r in resources):
                untracked += 1
        elif status:
            changed += 1
            if status[:1] in b"RC":
                next(fields, None)
    return Uncommitted(changed, untracked) if changed or untracked else None


def tracked(resource: Resource, path: Path) -> bool:
    """Whether git tracks ``path`` (a file, or anything under a folder) in the repository of
    ``resource``; False when it cannot be read."""
    try:
        repository = Repository.find(resource, resource.resource_id, base_env())
        inside = _relative(repository.location, path)
        if inside is None or inside == PurePosixPath("."):
            return False
        listed = repository.git.run(
            "--no-optional-locks", "ls-files", "-z", "--", f":(literal){inside}",
            fix="check the repository",
        )  # fmt: skip
    except SandboxError:
        return False
    return bool(listed.strip(b"\0"))


def _relative(top: Path, path: Path) -> PurePosixPath | None:
    """``path`` relative to the repository's ``top``; None outside it."""
    try:
        return PurePosixPath(path.resolve().relative_to(top.resolve()).as_posix())
    except ValueError:
        return None
