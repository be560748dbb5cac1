"""`resource add` says when a folder or database file it registers is tracked by git in a
registered repository (or the other way round).

The repository's sandbox and Apply work on commits and a branch, so the two do not collide;
but Apply of the inner resource writes into the working tree, where git then shows its
rows or files as a change of the person's checkout (docs/resources.md). Said once, when it
is registered, with the way to keep them apart.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.git.uncommitted import tracked
from cleveragents_tui.store.store import Store


def tracked_notes(store: Store, added: Resource) -> list[str]:
    """A line for each registered repository that tracks ``added``'s path (or, for a
    repository added, a registered folder or database file in it)."""
    if added.path is None:
        return []
    with store.unit_of_work() as uow:
        others = [r for r in uow.resources.registered() if r.resource_id != added.resource_id]
    notes = []
    for other in others:
        if other.path is None or (other.kind == "git") == (added.kind == "git"):
            continue
        repository, inner = (other, added) if other.kind == "git" else (added, other)
        top, path = Path(repository.location), Path(inner.location)
        if top not in path.parents or not tracked(repository, path):
            continue
        shown = path.relative_to(top).as_posix()
        what = "folder" if path.is_dir() else "file"
        untrack = f"git -C {shlex.quote(str(top))} rm -r --cached -- {shlex.quote(shown)}"
        notes.append(
            f"{shown} ({inner.resource_id}) is tracked by git in {repository.resource_id}: "
            f"what its plans change lands in that {what} of your working tree, which git then "
            f"shows as a change of your checkout; to keep them apart, add {shown} to .gitignore "
            f"and untrack it: {untrack}"
        )
    return notes
