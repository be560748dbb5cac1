"""Tree objects: one directory's listing (name → :class:`Entry`), stored git-style.

A tree is a JSON object in the :class:`~cleveragents_tui.sandbox.objectstore.objects.ObjectStore`; a
sub-directory's entry names its tree, so checkpoints that differ in ten files share every
other tree and blob. Entries also carry the lstat details a file had when it was recorded,
which is what lets a checkpoint skip unchanged files without reading them (:func:`is_clean`).
"""

from __future__ import annotations

import json
import os
import stat
from collections import OrderedDict
from typing import NamedTuple

from cleveragents_tui.sandbox.objectstore.names import (
    check_entry_path,
    check_link_target,
    check_name,
    join_path,
)
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.safety import UnsafeInputError

_HEX = "0123456789abcdef"
FILE = "f"
DIRECTORY = "d"
SYMLINK = "l"
KINDS = frozenset({FILE, DIRECTORY, SYMLINK})
LINK_MODE = 0o777  # the mode every symlink is recorded with: links have no mode of their own


class Entry(NamedTuple):
    """One item of a directory listing.

    ``ref`` is the blob id of a file, the tree id of a directory, or a symlink's target.
    ``mode`` is the permission bits (0o777; setuid, setgid and sticky are not kept).
    ``size``, ``mtime_ns``, ``ino`` and ``ctime_ns`` are what lstat said when the entry was
    recorded: they let the next checkpoint skip unchanged files without reading them.
    Directories and links keep zeros there (their own times churn and are not restored).
    """

    kind: str
    mode: int
    size: int
    mtime_ns: int
    ino: int
    ctime_ns: int
    ref: str

    def same_content(self, other: Entry) -> bool:
        """Same kind, permissions and content (stat details aside)."""
        return self.kind == other.kind and self.mode == other.mode and self.ref == other.ref


Tree = dict[str, Entry]


def is_clean(entry: Entry | None, st: os.stat_result, stamp: int) -> bool:
    """True when lstat proves a regular file unchanged since ``entry`` was recorded.

    Size, mtime, mode and inode are what a tool might keep while rewriting a file (it can
    even put mtime back with ``os.utime``); ``ctime`` it cannot set, because the kernel
    moves it on every change. An entry whose ctime is not earlier than the stamp of the
    scan that recorded it may have changed again within the same clock tick, so it is
    never trusted: the file is read and hashed instead.
    """
    return (
        entry is not None
        and entry.kind == FILE
        and entry.ctime_ns == st.st_ctime_ns
        and entry.ctime_ns < stamp
        and entry.size == st.st_size
        and entry.mtime_ns == st.st_mtime_ns
        and entry.ino == st.st_ino
        and entry.mode == stat.S_IMODE(st.st_mode)
    )


def encode_tree(tree: Tree) -> bytes:
    rows = [[name, *tree[name]] for name in sorted(tree)]
    return json.dumps({"v": 1, "e": rows}, separators=(",", ":")).encode()


def decode_tree(data: bytes, *, top: bool) -> Tree:
    """Parse and validate a tree object; anything unexpected raises UnsafeInputError."""
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise UnsafeInputError(
            f"tree object is not JSON ({exc})", "the checkpoint is damaged"
        ) from exc
    rows = doc.get("e") if isinstance(doc, dict) and doc.get("v") == 1 else None
    if not isinstance(rows, list):
        raise UnsafeInputError("tree object has an unknown format", "the checkpoint is damaged")
    tree: Tree = {}
    previous = ""
    for row in rows:  # written for speed: a rollback may read thousands of these
        if type(row) is not list or len(row) != 8:
            raise UnsafeInputError(f"tree row {row!r} is malformed", "the checkpoint is damaged")
        name, kind, mode, size, mtime, ino, ctime, ref = row
        check_name(name, top=top)
        if name <= previous:
            raise UnsafeInputError(f"tree lists {name!r} twice or out of order", "damaged tree")
        previous = name
        if kind not in KINDS:
            raise UnsafeInputError(
                f"{name!r} has kind {kind!r}", "only files, directories and symlinks are allowed"
            )
        if not (
            type(mode) is int
            and type(size) is int
            and type(mtime) is int
            and type(ino) is int
            and type(ctime) is int
            and 0 <= mode <= 0o777
            and size >= 0
            and ino >= 0
        ):
            raise UnsafeInputError(f"{name!r} has a bad mode, size or time", "damaged tree")
        if type(ref) is not str or (kind != SYMLINK and (len(ref) != 64 or ref.strip(_HEX))):
            raise UnsafeInputError(f"{name!r} has reference {ref!r}", "damaged tree")
        if kind == SYMLINK and mode != LINK_MODE:
            # Links have no mode of their own: one recorded otherwise could not be restored.
            raise UnsafeInputError(f"symlink {name!r} has mode {mode:o}", "damaged tree")
        tree[name] = Entry(kind, mode, size, mtime, ino, ctime, ref)
    return tree


class Trees:
    """Tree objects in an :class:`ObjectStore`, parsed once and kept in a bounded cache."""

    def __init__(self, store: ObjectStore, capacity: int = 16384) -> None:
        self.store = store
        self._capacity = capacity
        self._cache: OrderedDict[tuple[str, bool], Tree] = OrderedDict()

    def load(self, oid: str, *, top: bool = False) -> Tree:
        key = (oid, top)
        tree = self._cache.get(key)
        if tree is None:
            tree = decode_tree(self.store.read_bytes(oid), top=top)
            self._remember(key, tree)
        else:
            self._cache.move_to_end(key)
        return tree

    def peek(self, oid: str, *, top: bool = False) -> Tree | None:
        """The tree if it is already parsed in memory, else None (nothing is read)."""
        return self._cache.get((oid, top))

    def save(self, tree: Tree, *, top: bool = False) -> str:
        oid = self.store.put_bytes(encode_tree(tree))
        self._remember((oid, top), tree)
        return oid

    def _remember(self, key: tuple[str, bool], tree: Tree) -> None:
        self._cache[key] = tree
        if len(self._cache) > self._capacity:
            self._cache.popitem(last=False)

    def reachable(self, root: str, into: set[str]) -> None:
        """Add ``root`` and every tree and blob under it to ``into``."""
        stack = [(root, True)]
        while stack:
            oid, top = stack.pop()
            if oid in into:
                continue
            into.add(oid)
            for entry in self.load(oid, top=top).values():
                if entry.kind == DIRECTORY:
                    stack.append((entry.ref, False))
                elif entry.kind == FILE:
                    into.add(entry.ref)

    def verify(self, root: str) -> None:
        """Every tree and blob under ``root`` exists and matches its id."""
        seen: set[str] = set()
        stack = [(root, "", True)]
        while stack:
            oid, rel, top = stack.pop()
            if oid in seen:
                continue
            seen.add(oid)
            self.store.check(oid)
            for name, entry in self.load(oid, top=top).items():
                path = join_path(rel, name)
                if entry.kind == DIRECTORY:
                    stack.append((entry.ref, path, False))
                elif entry.kind == FILE:
                    self.store.check(entry.ref)
                else:
                    check_link_target(path, entry.ref)

    def lookup(self, root: str, path: str) -> Entry | None:
        """The entry at ``path`` (validated) in the tree ``root``, or None."""
        parts = check_entry_path(path).split("/")
        tree = self.load(root, top=True)
        for part in parts[:-1]:
            entry = tree.get(part)
            if entry is None or entry.kind != DIRECTORY:
                return None
            tree = self.load(entry.ref)
        return tree.get(parts[-1])
