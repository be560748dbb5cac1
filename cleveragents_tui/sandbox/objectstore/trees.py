"""Tree objects: one directory's listing (name → :class:`Entry`), stored git-style.

A tree is an object in the :class:`~cleveragents_tui.sandbox.objectstore.objects.ObjectStore`;
a sub-directory's entry names its tree, so checkpoints that differ in ten files share every
other tree and blob. Two formats are read:

- format 1, JSON ``{"v": 1, "e": [[name, kind, mode, size, mtime, ino, ctime, ref], ...]}``:
  entries carry the lstat details a file had when it was recorded, which is what lets a
  scan skip unchanged files without reading them (:func:`is_clean`). The git sandbox's
  blind spots still write it; filesystem_copy sandboxes made before format 2 hold it.
- format 2, binary (:func:`encode_entries`), written by ``Trees(compact=True)``: no lstat
  details (filesystem_copy keeps them in a local cache file, :mod:`.filesystem_index`),
  ids as 32 bytes, and a changed directory stored as a *delta* naming its previous tree
  and only the entries that changed, when that is at most half of the listing::

      b"\0CT2F" entries                                      a whole listing
      b"\0CT2D" base id (32) removed (4) names... entries    a delta of the base

  An entry is kind (1), name length (1), mode (2), size (8), mtime (8), [ino (8), ctime
  (8) in the cache file only], the name, then a blob or tree id (32) or a symlink's
  target (2-byte length and bytes). A chain of deltas is at most :data:`MAX_CHAIN` long.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from cleveragents_tui.sandbox.base import CheckpointMissingError
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
MAX_CHAIN = 32  # deltas under a tree at most: reading one never takes more than 33 objects
FULL = b"\0CT2F"
DELTA = b"\0CT2D"
_FIXED = struct.Struct("<BBHQq")
_STATS = struct.Struct("<Qq")
_LINK = struct.Struct("<H")
_COUNT = struct.Struct("<I")
_CODE = {FILE: 1, DIRECTORY: 2, SYMLINK: 3}
_KIND_OF = {code: kind for kind, code in _CODE.items()}


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


def content_of(entry: Entry) -> Entry:
    """``entry`` without the lstat details a format-2 tree does not keep."""
    if entry.ino or entry.ctime_ns:
        return Entry(entry.kind, entry.mode, entry.size, entry.mtime_ns, 0, 0, entry.ref)
    return entry


def encode_entries(tree: Mapping[str, Entry], *, stats: bool) -> bytes:
    """Format 2's listing of ``tree`` in name order; ``stats`` keeps ino and ctime too."""
    out: list[bytes] = []
    for name in sorted(tree):
        entry = tree[name]
        raw = os.fsencode(name)
        out.append(_FIXED.pack(_CODE[entry.kind], len(raw), entry.mode, entry.size, entry.mtime_ns))
        if stats:
            out.append(_STATS.pack(entry.ino, entry.ctime_ns))
        out.append(raw)
        if entry.kind == SYMLINK:
            target = os.fsencode(entry.ref)
            out.append(_LINK.pack(len(target)) + target)
        else:
            out.append(bytes.fromhex(entry.ref))
    return b"".join(out)


def _damaged(what: str) -> UnsafeInputError:
    return UnsafeInputError(what, "the checkpoint is damaged")


def _take(data: bytes, offset: int, length: int) -> bytes:
    piece = data[offset : offset + length]
    if len(piece) != length:
        raise _damaged("tree object is truncated")
    return piece


def _name(raw: bytes, *, top: bool) -> str:
    """A name read from a format-2 object, checked as :func:`check_name` would: its length
    byte keeps it under 256 bytes, and bytes decoded with surrogateescape always encode."""
    if not raw or raw in (b".", b"..") or b"/" in raw or b"\\" in raw or b"\0" in raw:
        raise UnsafeInputError(f"name {raw!r} is not allowed in a tree", "use a plain file name")
    name = raw.decode("utf-8", "surrogateescape")
    return check_name(name, top=True) if top else name


def decode_entries(data: bytes, offset: int, *, stats: bool, top: bool) -> Tree:
    """Parse and validate format 2's listing from ``offset`` to the end of ``data``."""
    tree: Tree = {}
    previous = ""
    end = len(data)
    fixed = _FIXED.unpack_from
    try:  # written for speed: a rollback may read thousands of these
        while offset < end:
            code, length, mode, size, mtime = fixed(data, offset)
            offset += _FIXED.size
            ino = ctime = 0
            if stats:
                ino, ctime = _STATS.unpack_from(data, offset)
                offset += _STATS.size
            name = _name(_take(data, offset, length), top=top)
            offset += length
            if name <= previous:
                raise _damaged(f"tree lists {name!r} twice or out of order")
            previous = name
            kind = _KIND_OF.get(code)
            if kind is None or mode > 0o777:
                raise _damaged(f"{name!r} has kind {code} or mode {mode:o}")
            if kind == SYMLINK:
                (count,) = _LINK.unpack_from(data, offset)
                ref = os.fsdecode(_take(data, offset + _LINK.size, count))
                offset += _LINK.size + count
                if mode != LINK_MODE:
                    raise _damaged(f"symlink {name!r} has mode {mode:o}")
            else:
                ref = data[offset : offset + 32].hex()
                offset += 32
                if offset > end:
                    raise _damaged("tree object is truncated")
            tree[name] = Entry(kind, mode, size, mtime, ino, ctime, ref)
    except struct.error as exc:
        raise _damaged(f"tree object is truncated ({exc})") from exc
    return tree


def encode_delta(base: str, removed: list[str], changed: Tree) -> bytes:
    names = [os.fsencode(name) for name in sorted(removed)]
    listed = b"".join(bytes([len(raw)]) + raw for raw in names)
    return b"".join(
        (
            DELTA,
            bytes.fromhex(base),
            _COUNT.pack(len(names)),
            listed,
            encode_entries(changed, stats=False),
        )
    )


def decode_object(data: bytes, *, top: bool) -> tuple[str | None, list[str], Tree]:
    """(base id, names removed, entries) of a delta; (None, [], the listing) otherwise."""
    if data.startswith(FULL):
        return None, [], decode_entries(data, len(FULL), stats=False, top=top)
    if not data.startswith(DELTA):
        return None, [], decode_tree(data, top=top)
    offset = len(DELTA)
    base = _take(data, offset, 32).hex()
    offset += 32
    try:
        (count,) = _COUNT.unpack_from(data, offset)
    except struct.error as exc:
        raise _damaged("tree object is truncated") from exc
    offset += _COUNT.size
    removed: list[str] = []
    for _ in range(min(count, len(data))):
        length = _take(data, offset, 1)[0]
        name = _name(_take(data, offset + 1, length), top=top)
        if removed and name <= removed[-1]:
            raise _damaged(f"delta removes {name!r} twice or out of order")
        removed.append(name)
        offset += 1 + length
    if len(removed) != count:
        raise _damaged("tree object is truncated")
    changed = decode_entries(data, offset, stats=False, top=top)
    if not changed.keys().isdisjoint(removed):
        raise _damaged("delta both removes and changes a name")
    return base, removed, changed


_Loaded = tuple[Tree, str | None, int]  # a listing, the base it is a delta of, its depth


class Trees:
    """Tree objects in an :class:`ObjectStore`, parsed once and kept in a bounded cache.

    ``compact`` saves format 2 (deltas where they pay); otherwise format 1, with the lstat
    details. Both formats are read either way.
    """

    def __init__(self, store: ObjectStore, capacity: int = 16384, *, compact: bool = False) -> None:
        self.store = store
        self._capacity = capacity
        self._compact = compact
        self._cache: OrderedDict[tuple[str, bool], _Loaded] = OrderedDict()

    def load(self, oid: str, *, top: bool = False) -> Tree:
        return self._load(oid, top)[0]

    def _load(self, oid: str, top: bool) -> _Loaded:
        hit = self._cache.get((oid, top))
        if hit is not None:
            self._cache.move_to_end((oid, top))
            return hit
        chain: list[tuple[str, str, list[str], Tree]] = []
        current = oid
        while True:  # down the deltas to a listing already parsed or stored whole
            found = self._cache.get((current, top))
            if found is not None:
                break
            base, removed, entries = decode_object(self.store.read_bytes(current), top=top)
            if base is None:
                found = (entries, None, 0)
                self._remember((current, top), found)
                break
            if len(chain) >= MAX_CHAIN:
                raise _damaged(f"tree {oid[:12]} is a chain of more than {MAX_CHAIN} deltas")
            chain.append((current, base, removed, entries))
            current = base
        for current, base, removed, changed in reversed(chain):
            tree = dict(found[0])
            for name in removed:
                if tree.pop(name, None) is None:
                    raise _damaged(f"delta {current[:12]} removes {name!r}, not in its base")
            tree.update(changed)
            found = (dict(sorted(tree.items())), base, found[2] + 1)
            if found[2] > MAX_CHAIN:
                raise _damaged(f"tree {oid[:12]} is a chain of more than {MAX_CHAIN} deltas")
            self._remember((current, top), found)
        return found

    def save(self, tree: Tree, *, top: bool = False, base: str | None = None) -> str:
        """Store ``tree``; ``base`` (compact only) is the tree it replaces, which a delta names."""
        if not self._compact:
            oid = self.store.put_bytes(encode_tree(tree))
            self._remember((oid, top), (tree, None, 0))
            return oid
        tree = {name: content_of(entry) for name, entry in tree.items()}
        delta = self._delta(tree, top, base) if base is not None else None
        data, saved = delta or (FULL + encode_entries(tree, stats=False), (tree, None, 0))
        oid = self.store.put_bytes(data)
        self._remember((oid, top), saved)
        return oid

    def _delta(self, tree: Tree, top: bool, base: str) -> tuple[bytes, _Loaded] | None:
        """``tree`` as a delta of ``base``, when that is short enough to pay."""
        try:
            before, _, depth = self._load(base, top)
        except (CheckpointMissingError, UnsafeInputError):
            return None
        if depth >= MAX_CHAIN:
            return None
        removed = [name for name in before if name not in tree]
        changed = {
            name: entry
            for name, entry in tree.items()
            if (old := before.get(name)) is None or content_of(old) != entry
        }  # a format-1 base carries lstat details: compared without them
        if 2 * (len(removed) + len(changed)) > len(tree):
            return None
        return encode_delta(base, removed, changed), (tree, base, depth + 1)

    def _remember(self, key: tuple[str, bool], loaded: _Loaded) -> None:
        self._cache[key] = loaded
        if len(self._cache) > self._capacity:
            self._cache.popitem(last=False)

    def _with_bases(self, oid: str, top: bool) -> list[str]:
        """``oid`` and the trees it is a delta of, down to one stored whole."""
        chain = [oid]
        while (base := self._load(chain[-1], top)[1]) is not None:
            chain.append(base)
        return chain

    def reachable(self, roots: Iterable[str]) -> set[str]:
        """Every tree under ``roots`` (with the trees they are deltas of) and every blob.

        A base is kept as an object, not walked: what it names is kept only when it is
        reached as a tree itself, which is why walked trees are tracked apart from the
        result (a tree first met as a base must still be walked when met as a tree).
        """
        keep: set[str] = set()
        walked: set[str] = set()
        stack = [(root, True) for root in roots]
        while stack:
            oid, top = stack.pop()
            if oid in walked:
                continue
            walked.add(oid)
            keep.update(self._with_bases(oid, top))
            for entry in self.load(oid, top=top).values():
                if entry.kind == DIRECTORY:
                    stack.append((entry.ref, False))
                elif entry.kind == FILE:
                    keep.add(entry.ref)
        return keep

    def verify(self, root: str) -> None:
        """Every tree (deltas' bases too) and blob under ``root`` exists and matches its id."""
        seen: set[str] = set()
        stack = [(root, "", True)]
        while stack:
            oid, rel, top = stack.pop()
            if oid in seen:
                continue
            seen.add(oid)
            self.store.check(oid)
            for base in self._with_bases(oid, top)[1:]:
                self.store.check(base)
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
