"""What a filesystem_copy sandbox's Apply would land, read without writing anything.

``changes_since_baseline`` scans ``work/`` into the object store and rewrites the stat cache
(a checkpoint's scan); a dry run of Apply must not. This walks ``work/`` beside the origin
tree and hashes the files it cannot tell apart otherwise, listing the same paths as
:func:`~cleveragents_tui.sandbox.filesystem_compare.tree_items` would after a scan.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cleveragents_tui.sandbox.base import Change, ChangeKind, SandboxError
from cleveragents_tui.sandbox.filesystem_restore import GIT, kind_of
from cleveragents_tui.sandbox.objectstore.names import join_path
from cleveragents_tui.sandbox.objectstore.tree_writer import (
    hash_path,
    list_path,
    lstat_path,
    readlink_path,
)
from cleveragents_tui.sandbox.objectstore.trees import DIRECTORY, FILE, SYMLINK, Entry, Trees


def pending_changes(trees: Trees, origin: str, work: Path) -> list[Change]:
    """Every path of ``work`` that differs from tree ``origin``, sorted by path."""
    out: list[Change] = []
    _walk(trees, origin, work, "", out, in_work=True)
    return sorted(out, key=lambda change: change.path)


def _walk(
    trees: Trees, tree: str | None, work: Path, rel: str, out: list[Change], *, in_work: bool
) -> None:
    """Folder ``rel``: tree ``tree`` (None: absent from the origin) against ``work`` (when
    ``in_work``: absent from work/ otherwise)."""
    before = trees.load(tree, top=not rel) if tree else {}
    names = set(list_path(work, rel)) if in_work else set()
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
            _walk(trees, was.ref, work, path, out, in_work=True)
            continue
        if was is not None and st is not None and _same(work, path, was, st):
            continue
        kind = ChangeKind.ADDED if was is None else ChangeKind.MODIFIED
        out.append(Change(path, ChangeKind.DELETED if st is None else kind))
        if was is not None and was.kind == DIRECTORY:  # everything under it goes
            _walk(trees, was.ref, work, path, out, in_work=False)
        if now == DIRECTORY:  # everything under it comes
            _walk(trees, None, work, path, out, in_work=True)


def _mode(st: os.stat_result) -> int:
    return stat.S_IMODE(st.st_mode) & 0o777


def _same(work: Path, path: str, was: Entry, st: os.stat_result) -> bool:
    """Whether ``path`` in work/ holds ``was`` (kind, permissions, content)."""
    now = kind_of(st.st_mode)
    if now != was.kind:
        return False
    if now == SYMLINK:
        return readlink_path(work, path) == was.ref
    if now == FILE:
        return _mode(st) == was.mode and hash_path(work, path) == was.ref
    return False
