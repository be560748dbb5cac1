"""What a filesystem_copy sandbox's Apply would land, read without writing anything.

``changes_since_baseline`` scans ``work/`` into the object store and rewrites the stat cache
(a checkpoint's scan); a dry run of Apply must not. This walks ``work/`` beside the origin
tree, listing the same paths as
:func:`~cleveragents_tui.sandbox.filesystem_compare.tree_items` would after a scan. A file
the stat cache proves unchanged (as a scan trusts it) is not read; any other is hashed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cleveragents_tui.sandbox.base import Change, ChangeKind, SandboxError
from cleveragents_tui.sandbox.changes import Item
from cleveragents_tui.sandbox.filesystem_compare import conflicts_in_real
from cleveragents_tui.sandbox.filesystem_index import StatIndex
from cleveragents_tui.sandbox.filesystem_restore import GIT, kind_of
from cleveragents_tui.sandbox.objectstore.names import join_path
from cleveragents_tui.sandbox.objectstore.tree_writer import (
    hash_path,
    list_path,
    lstat_path,
    readlink_path,
)
from cleveragents_tui.sandbox.objectstore.trees import (
    DIRECTORY,
    FILE,
    SYMLINK,
    Entry,
    Trees,
    is_clean,
)


class _Walk:
    def __init__(self, trees: Trees, work: Path, index: StatIndex | None) -> None:
        self.trees = trees
        self.work = work
        self.index = index
        self.out: list[Change] = []
        self.items: list[Item] = []  # the same paths, for Apply's check of the real directory


def pending_changes(trees: Trees, origin: str, work: Path, index: StatIndex | None) -> list[Change]:
    """Every path of ``work`` that differs from tree ``origin``, sorted by path; ``index``:
    the stat cache of ``work`` (None: every file is read)."""
    walk = _Walk(trees, work, index)
    _walk(walk, origin, "", in_work=True)
    return sorted(walk.out, key=lambda change: change.path)


def pending_conflicts(
    trees: Trees, origin: str, work: Path, index: StatIndex | None, real: Path
) -> list[str]:
    """The paths Apply would refuse to write over: changed in ``real`` since the sandbox
    was made (as :func:`~cleveragents_tui.sandbox.filesystem_compare.check_real` finds them)."""
    walk = _Walk(trees, work, index)
    _walk(walk, origin, "", in_work=True)
    items = sorted(walk.items, key=lambda item: item.path)
    return conflicts_in_real(real, items, lambda item: _with_content(work, item))


def _with_content(work: Path, item: Item) -> Item:
    """``item`` with the content work/ holds at its path (the walk keeps kind and mode)."""
    new = item.new
    if new is None or new.kind == DIRECTORY:
        return item
    ref = hash_path(work, item.path) if new.kind == FILE else readlink_path(work, item.path)
    return item._replace(new=new._replace(ref=ref))


def _walk(walk: _Walk, tree: str | None, rel: str, *, in_work: bool) -> None:
    """Folder ``rel``: tree ``tree`` (None: absent from the origin) against work/ (when
    ``in_work``: absent from it otherwise)."""
    trees, work, out = walk.trees, walk.work, walk.out
    before = trees.load(tree, top=not rel) if tree else {}
    names = set(list_path(work, rel)) if in_work else set()
    cached = walk.index.listing(rel) if walk.index is not None and in_work else None
    if not rel:
        names.discard(GIT)
    for name in sorted(before.keys() | names):
        path = join_path(rel, name)
        was = before.get(name)
        st = lstat_path(work, path) if name in names else None
        now = None if st is None else kind_of(st.st_mode)
        if now == "special":
            raise SandboxError(
                f"cannot record {path!r}: it is a device, FIFO or socket",
                "remove it; only files, directories and symlinks are kept",
            )
        if was is not None and st is not None and was.kind == now == DIRECTORY:
            if was.mode != _mode(st):
                out.append(Change(path, ChangeKind.MODIFIED))
                walk.items.append(Item(path, was, _entry(st)))
            _walk(walk, was.ref, path, in_work=True)
            continue
        known = cached.get(name) if cached is not None else None
        if was is not None and st is not None and _same(walk, path, was, st, known):
            continue
        kind = ChangeKind.ADDED if was is None else ChangeKind.MODIFIED
        out.append(Change(path, ChangeKind.DELETED if st is None else kind))
        walk.items.append(Item(path, was, None if st is None else _entry(st)))
        if was is not None and was.kind == DIRECTORY:  # everything under it goes
            _walk(walk, was.ref, path, in_work=False)
        if now == DIRECTORY:  # everything under it comes
            _walk(walk, None, path, in_work=True)


def _mode(st: os.stat_result) -> int:
    return stat.S_IMODE(st.st_mode) & 0o777


def _entry(st: os.stat_result) -> Entry:
    """What work/ holds at a path, without its content (read only if a check needs it)."""
    return Entry(kind_of(st.st_mode), _mode(st), st.st_size, 0, 0, 0, "")


def _same(walk: _Walk, path: str, was: Entry, st: os.stat_result, known: Entry | None) -> bool:
    """Whether ``path`` in work/ holds ``was`` (kind, permissions, content); ``known``: its
    entry in the stat cache, whose content is trusted while lstat proves it unchanged."""
    now = kind_of(st.st_mode)
    if now != was.kind:
        return False
    if now == SYMLINK:
        return readlink_path(walk.work, path) == was.ref
    if now != FILE or _mode(st) != was.mode:
        return False
    stamp = walk.index.snapshot.stamp if walk.index is not None else 0
    if is_clean(known, st, stamp):
        return known is not None and known.ref == was.ref
    return hash_path(walk.work, path) == was.ref
