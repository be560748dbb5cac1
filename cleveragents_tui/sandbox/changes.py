"""Landing a sandbox's changes on the real directory, path by path."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import NamedTuple

from cleveragents_tui.domain.wording import counted
from cleveragents_tui.sandbox.base import Change, ChangeKind, NothingLandedError
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.objectstore.tree_writer import (
    TreeWriter,
    hash_path,
    lstat_path,
    readlink_path,
)
from cleveragents_tui.sandbox.objectstore.trees import DIRECTORY, FILE, SYMLINK, Entry


class Item(NamedTuple):
    """One path that differs: what the real directory had (``old``) and what it gets (``new``)."""

    path: str
    old: Entry | None
    new: Entry | None


def _path_of(item: Item) -> str:
    return item.path


def changes_of(items: list[Item]) -> tuple[Change, ...]:
    """The protocol's view of ``items``, sorted by path."""
    out = []
    for item in sorted(items, key=_path_of):
        if item.old is None:
            kind = ChangeKind.ADDED
        elif item.new is None:
            kind = ChangeKind.DELETED
        else:
            kind = ChangeKind.MODIFIED
        out.append(Change(item.path, kind))
    return tuple(out)


def apply_items(real: Path, items: list[Item], store: ObjectStore, *, durable: bool) -> None:
    """Make each path of ``real`` what its item says, through a :class:`TreeWriter`.

    Removals go deepest first, creations parents first, and directory modes are set last,
    deepest first, so a read-only directory is filled before it is closed. A file entry
    with a recorded mtime gets it back; one without (``mtime_ns == 0``) keeps the time of
    writing.
    """
    with TreeWriter(real, durable=durable) as writer:
        for item in sorted(items, key=_path_of, reverse=True):
            old, new = item.old, item.new
            if old is not None and (new is None or new.kind != old.kind or new.kind == SYMLINK):
                writer.remove(item.path)
        modes: list[tuple[str, int]] = []
        for path, _, new in sorted(items, key=_path_of):
            if new is None:
                continue
            if new.kind == DIRECTORY:
                writer.make_dir(path)
                modes.append((path, new.mode))
            elif new.kind == FILE:
                writer.write_object(path, store, new, mtime_ns=new.mtime_ns or None)
            else:
                writer.symlink(path, new.ref)
        for path, mode in reversed(modes):
            writer.set_mode(path, mode)


def holds_new(real: Path, item: Item) -> bool:
    """Whether ``real`` already holds what ``item`` lands there: the plan's own content, left
    by an Apply a crash interrupted (docs/reliability.md). Such a path is no conflict, and
    writing it again changes nothing (a mode the crash left unset is set again)."""
    st = lstat_path(real, item.path)
    old, new = item.old, item.new
    if st is None:  # landed as a removal, or removed on the way to another kind (as above)
        return new is None or (old is not None and (new.kind != old.kind or new.kind == SYMLINK))
    if new is None:
        return False
    if new.kind == DIRECTORY:
        return stat.S_ISDIR(st.st_mode)
    if new.kind == SYMLINK:
        return stat.S_ISLNK(st.st_mode) and readlink_path(real, item.path) == new.ref
    return stat.S_ISREG(st.st_mode) and hash_path(real, item.path) == new.ref


def changed_outside(real: Path, conflicts: list[str]) -> NothingLandedError:
    """Apply's refusal, with nothing written, when ``conflicts`` changed in ``real`` since
    the sandbox was made."""
    shown = ", ".join(conflicts[:5]) + (" ..." if len(conflicts) > 5 else "")
    return NothingLandedError(
        f"{counted(len(conflicts), 'path')} changed in {real} since the sandbox was made: {shown}",
        "nothing was applied; put those paths back as they were, or keep them and correct "
        "the plan (agents plan correct), then apply again",
    )
