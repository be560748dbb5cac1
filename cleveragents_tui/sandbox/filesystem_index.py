"""The stat cache of a filesystem_copy sandbox: what lstat said of each file of ``work/``.

It is what lets a checkpoint skip unchanged files without reading them (the
:func:`~cleveragents_tui.sandbox.objectstore.trees.is_clean` rule), kept out of the tree
objects so a checkpoint stores only content: file ``index`` in the sandbox's folder,
rewritten in place after every scan and rollback and never flushed (losing it only means
reading files again). Format 2::

    b"CAIDX2\\n\\0"  crc32 of the rest (4)  stamp (8)  root tree id (32)  folders (4)
    per folder: path length (2), path, its tree id (32), listing length (4), listing

A listing is :func:`~cleveragents_tui.sandbox.objectstore.trees.encode_entries` with ino
and ctime. Folders are parsed when first asked for, and a folder unchanged since the file
was read is written back as the bytes read. Format 1 (JSON ``{"v": 1, "root", "stamp"}``,
naming a format-1 tree that carried the lstat details itself) is still read.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from cleveragents_tui.sandbox.objectstore.files import json_int, write_all
from cleveragents_tui.sandbox.objectstore.names import check_entry_path, check_oid
from cleveragents_tui.sandbox.objectstore.trees import Tree, decode_entries, encode_entries
from cleveragents_tui.sandbox.safety import UnsafeInputError

_MAGIC = b"CAIDX2\n\0"
_HEAD = struct.Struct("<Iq32sI")
_FOLDER = struct.Struct("<H")
_LISTING = struct.Struct("<32sI")


@dataclass(frozen=True)
class Snapshot:
    """A tree id and the filesystem time its scan started (for the racy-ctime rule)."""

    root: str
    stamp: int

    def to_json(self) -> dict[str, object]:
        return {"v": 1, "root": self.root, "stamp": self.stamp}

    @staticmethod
    def from_json(doc: dict[str, object]) -> Snapshot:
        return Snapshot(check_oid(doc.get("root")), json_int(doc.get("stamp"), "stamp"))


@dataclass
class Folder:
    """One folder of the cache: its tree id and listing (parsed, or the bytes read)."""

    tree: str
    entries: Tree | None = None
    raw: bytes | None = None


class StatIndex:
    """The lstat details of ``work/`` as scanned into ``snapshot`` (folder path → listing)."""

    def __init__(self, snapshot: Snapshot, folders: dict[str, Folder] | None = None) -> None:
        self.snapshot = snapshot
        self.folders: dict[str, Folder] = folders if folders is not None else {}

    def listing(self, rel: str, tree: str | None = None) -> Tree | None:
        """Folder ``rel``'s entries with their lstat details; None when not cached (or, given
        ``tree``, cached for another tree) or damaged."""
        folder = self.folders.get(rel)
        if folder is None or (tree is not None and folder.tree != tree):
            return None
        if folder.entries is None:
            try:
                folder.entries = decode_entries(folder.raw or b"", 0, stats=True, top=not rel)
            except UnsafeInputError:
                del self.folders[rel]
                return None
        return folder.entries

    def save(self, path: Path) -> None:
        parts = [b""]
        for rel, folder in self.folders.items():
            if folder.raw is None:
                folder.raw = encode_entries(folder.entries or {}, stats=True)
            name = rel.encode("utf-8", "surrogateescape")
            parts.append(_FOLDER.pack(len(name)) + name)
            parts.append(_LISTING.pack(bytes.fromhex(folder.tree), len(folder.raw)))
            parts.append(folder.raw)
        root = bytes.fromhex(self.snapshot.root)
        parts[0] = struct.pack("<q32sI", self.snapshot.stamp, root, len(self.folders))
        body = b"".join(parts)
        _overwrite(path, _MAGIC + struct.pack("<I", zlib.crc32(body)) + body)

    @staticmethod
    def read(path: Path) -> StatIndex | None:
        """The cache in ``path``; None when it is missing, damaged or of no known format."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        try:
            if data.startswith(b"{"):
                doc = json.loads(data)
                return StatIndex(Snapshot.from_json(doc)) if isinstance(doc, dict) else None
            return _parse(data) if data.startswith(_MAGIC) else None
        except (ValueError, UnsafeInputError, struct.error):
            return None


def _overwrite(path: Path, data: bytes) -> None:
    """Rewrite ``path`` in place. Not a new file renamed over it: on ext4 that renaming
    flushes the file to the disk, which is the one cost a cache should not have. A reader
    that sees it half-written finds the CRC wrong and reads files again instead."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    try:
        write_all(fd, data)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def _parse(data: bytes) -> StatIndex | None:
    crc, stamp, root, count = _HEAD.unpack_from(data, len(_MAGIC))
    offset = len(_MAGIC) + 4
    if zlib.crc32(memoryview(data)[offset:]) != crc:
        return None
    offset += _HEAD.size - 4
    folders: dict[str, Folder] = {}
    for _ in range(count):
        (length,) = _FOLDER.unpack_from(data, offset)
        rel = data[offset + 2 : offset + 2 + length].decode("utf-8", "surrogateescape")
        offset += 2 + length
        tree, size = _LISTING.unpack_from(data, offset)
        offset += _LISTING.size
        if rel:
            check_entry_path(rel)
        folders[rel] = Folder(tree.hex(), raw=data[offset : offset + size])
        offset += size
    if offset != len(data):
        return None
    return StatIndex(Snapshot(root.hex(), stamp), folders)
