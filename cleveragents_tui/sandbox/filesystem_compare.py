"""What a filesystem_copy sandbox compares: two trees, and the real directory before apply.

Split from :mod:`.filesystem_copy`: :func:`tree_items` lists what differs between two
trees (folders the same tree id are skipped whole), and :func:`check_real` refuses an
apply over a path that someone changed in the real directory since the sandbox was made.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

from cleveragents_tui.sandbox.changes import Item, changed_outside, holds_new
from cleveragents_tui.sandbox.filesystem_restore import kind_of
from cleveragents_tui.sandbox.objectstore.names import join_path
from cleveragents_tui.sandbox.objectstore.tree_writer import (
    hash_path,
    list_path,
    lstat_path,
    readlink_path,
)
from cleveragents_tui.sandbox.objectstore.trees import DIRECTORY, FILE, SYMLINK, Trees


def tree_items(trees: Trees, old: str, new: str) -> list[Item]:
    """Every path whose entry differs between trees ``old`` and ``new``, in path order."""
    out: list[Item] = []
    _compare(trees, old, new, "", out)
    return sorted(out, key=lambda item: item.path)


def _compare(trees: Trees, old: str | None, new: str | None, rel: str, out: list[Item]) -> None:
    if old == new:
        return
    before = trees.load(old, top=not rel) if old else {}
    after = trees.load(new, top=not rel) if new else {}
    for name in before.keys() | after.keys():
        was, now = before.get(name), after.get(name)
        path = join_path(rel, name)
        if was is not None and now is not None and was.kind == now.kind == DIRECTORY:
            if was.mode != now.mode:
                out.append(Item(path, was, now))
            _compare(trees, was.ref, now.ref, path, out)
            continue
        if was is not None and now is not None and was.same_content(now):
            continue
        out.append(Item(path, was, now))
        if was is not None and was.kind == DIRECTORY:
            _compare(trees, was.ref, None, path, out)
        if now is not None and now.kind == DIRECTORY:
            _compare(trees, None, now.ref, path, out)


def check_real(real: Path, items: list[Item]) -> None:
    """Refuse to apply over paths someone else changed in the real directory."""
    conflicts = conflicts_in_real(real, items)
    if conflicts:
        raise changed_outside(real, conflicts)


def conflicts_in_real(
    real: Path, items: list[Item], with_content: Callable[[Item], Item] = lambda item: item
) -> list[str]:
    """The paths of ``items`` someone else changed in the real directory, which Apply
    refuses to write over. ``with_content`` fills in an item's new content, asked only for a
    path the real directory no longer holds as the sandbox found it (a dry run)."""
    deleted = {item.path for item in items if item.new is None}
    return [
        item.path
        for item in items
        if not (_real_matches(real, item, deleted) or holds_new(real, with_content(item)))
    ]


def _real_matches(real: Path, item: Item, deleted: set[str]) -> bool:
    """Whether the real directory still holds ``item.old`` at its path. Trees keep no lstat
    details (format 2), so a file there is read and hashed: only changed paths are."""
    st = lstat_path(real, item.path)
    old = item.old
    if old is None or st is None:
        return st is None and (old is None or item.new is None)
    if kind_of(st.st_mode) != old.kind:
        return False
    if old.kind == FILE:
        return stat.S_IMODE(st.st_mode) == old.mode and hash_path(real, item.path) == old.ref
    if old.kind == SYMLINK:
        return readlink_path(real, item.path) == old.ref
    if item.new is None or item.new.kind != DIRECTORY:  # it goes: nothing foreign inside
        names = list_path(real, item.path)
        return all(join_path(item.path, name) in deleted for name in names)
    return True
