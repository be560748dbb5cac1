"""What the filesystem_copy and overlay sandboxes share: objects, trees and safe file writes.

* :class:`ObjectStore` keeps file contents by their sha256, zlib-compressed, in fan-out
  folders (``ab/cdef...``), written once through a temporary file and a rename.
* A *tree* is one directory's listing (name → :class:`Entry`), stored as a JSON object in
  the same store, git-style: a sub-directory's entry names its tree, so checkpoints that
  differ in ten files share every other tree and blob.
* :class:`TreeWriter` is the only way either strategy changes a directory on disk: every
  path is validated, every component is opened with ``O_NOFOLLOW`` relative to its
  parent's descriptor, and every symbolic link it creates must point inside the tree
  (DESIGN.md section 8). Nothing it does can reach outside the root it was given.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import secrets
import stat
import struct
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from cleveragents_tui import failpoints
from cleveragents_tui.domain.ids import parse_ulid
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import Change, ChangeKind, CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.safety import UnsafeInputError, safe_relative_path

_OID = re.compile(r"^[0-9a-f]{64}$")
_HEX = "0123456789abcdef"
_PACK_NAME = re.compile(r"^[0-9a-f]{16}$")
_PACK_MAGIC = b"CAPACK1\n"
_PACK_END = b"CAPACKZ\n"
_IDX_ROW = struct.Struct("<32sQQ")
_TRAILER = struct.Struct("<QQ8s")
_REF = re.compile(r"^[0-9]{6}-[0-9a-f]{8}$")
_CHUNK = 1 << 20
_SMALL_FILE = 4 << 20
_MAX_TREE_BYTES = 256 << 20
_MAX_LINK = 4096
MAX_DEPTH = 256
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
FILE = "f"
DIRECTORY = "d"
SYMLINK = "l"
KINDS = frozenset({FILE, DIRECTORY, SYMLINK})


# --- validation -----------------------------------------------------------------------------


def check_oid(value: object) -> str:
    """A full lowercase sha256 hex digest; anything else in a manifest is refused."""
    if not isinstance(value, str) or not _OID.match(value):
        raise UnsafeInputError(f"{value!r} is not an object id", "object ids are 64 hex digits")
    return value


def check_ref(value: str) -> str:
    """A checkpoint reference as these strategies make them: ``NNNNNN-xxxxxxxx``."""
    if not isinstance(value, str) or not _REF.match(value):
        raise CheckpointMissingError(
            f"{value!r} is not a checkpoint reference of this sandbox",
            "use a reference returned by checkpoint()",
        )
    return value


def new_ref(seq: int) -> str:
    """A fresh reference: a sequence number for order, random hex so a reused number differs."""
    return f"{seq:06d}-{secrets.token_hex(4)}"


def ref_seq(ref: str) -> int:
    return int(check_ref(ref)[:6])


def check_name(name: object, *, top: bool) -> str:
    """One path component read from a tree object.

    Joined under parents that passed this check, a deeper name gives a path that
    :func:`safe_relative_path` accepts exactly when the name is non-empty and has no ``/``,
    NUL or backslash and is not ``.`` or ``..``; its ``.git`` and ``~`` rules concern the
    first component only, so top-level names go through it directly.
    """
    if (
        type(name) is not str
        or name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\x00" in name
    ):
        raise UnsafeInputError(f"name {name!r} is not allowed in a tree", "use a plain file name")
    if top:
        safe_relative_path(name)
    return name


def check_entry_path(raw: str) -> str:
    """A canonical relative path: :func:`safe_relative_path`, and no ``.``, ``//`` or trailing ``/``.

    Canonical form matters because two spellings of one path would be two entries.
    """
    path = safe_relative_path(raw)
    if str(path) != raw or "." in raw.split("/"):
        raise UnsafeInputError(f"path {raw!r} is not canonical", "write it as 'dir/file'")
    return raw


def check_link_target(link: str, target: object) -> str:
    """A symlink target that stays inside the tree wherever the link sits.

    Allowed: a relative target whose ``..`` components all come first and climb no higher
    than the link's own directory. Its parents are real directories, so climbing reaches a
    directory inside; the names after it each step into a directory inside or through
    another link that, by the same rule, lands inside. ``a/..`` after a link named ``a``
    could escape, which is why ``..`` after a name is refused.
    """
    if (
        not isinstance(target, str)
        or not target
        or "\x00" in target
        or target.startswith("/")
        or len(target) > _MAX_LINK
    ):
        raise UnsafeInputError(
            f"symlink {link!r} -> {target!r} points outside the sandbox", "use a relative target"
        )
    climbs = 0
    named = False
    for part in target.split("/"):
        if part == "..":
            if named:
                raise UnsafeInputError(
                    f"symlink {link!r} -> {target!r} uses '..' after a name",
                    "write the target without going back up",
                )
            climbs += 1
        elif part not in ("", "."):
            named = True
    if climbs > link.count("/"):
        raise UnsafeInputError(
            f"symlink {link!r} -> {target!r} points outside the sandbox",
            "point it at a path inside the sandbox",
        )
    return target


def split_path(rel: str) -> tuple[str, str]:
    """``'a/b/c'`` → ``('a/b', 'c')``; ``'c'`` → ``('', 'c')``."""
    parent, _, name = rel.rpartition("/")
    return parent, name


def join_path(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


# --- small files -------------------------------------------------------------------------------


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, durable: bool) -> None:
    """Write ``path`` so readers see the old bytes or the new, never a mix."""
    failpoints.hit("fs.write", "file")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def write_json(path: Path, value: object, *, durable: bool) -> None:
    write_atomic(path, json.dumps(value, sort_keys=True).encode(), durable=durable)


def read_json_object(path: Path) -> dict[str, object]:
    """A JSON object from ``path``; anything else is a damaged sandbox."""
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CheckpointMissingError(
            f"{path} cannot be read ({exc})", "the sandbox is damaged"
        ) from exc
    if not isinstance(value, dict):
        raise CheckpointMissingError(f"{path} is not a JSON object", "the sandbox is damaged")
    return value


def json_int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise UnsafeInputError(f"{what} {value!r} is not an integer", "the sandbox is damaged")
    return value


def fs_now(stamp: Path) -> int:
    """The filesystem clock now: the time the kernel would stamp on a change made right now.

    Touching a file and reading its mtime gives the same coarse clock that stamps
    ``ctime``, so a file whose ctime is earlier than this value cannot change again without
    its ctime moving (the "racy git" rule; see :func:`is_clean`).
    """
    fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.utime(fd)
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)


META = "sandbox.json"


@dataclass(frozen=True)
class Identity:
    """Whose sandbox a folder holds; kept in its ``sandbox.json`` and checked on open."""

    strategy: str
    plan_id: str
    resource_id: str
    location: str

    @staticmethod
    def of(strategy: str, resource: Resource, plan_id: str, location: Path) -> Identity:
        return Identity(
            strategy, parse_ulid(plan_id, "plan id"), resource.resource_id, str(location)
        )

    def meta(self, **extra: object) -> dict[str, object]:
        return {"v": 1, **asdict(self), **extra}

    def claim(self, root: Path) -> None:
        """Make ``root`` this sandbox's folder: new or empty, one sandbox per folder."""
        if (root / META).exists():
            raise SandboxError(
                f"a sandbox already exists in {root}", "open it, or discard it first"
            )
        root.mkdir(parents=True, exist_ok=True)
        if any(root.iterdir()):
            raise SandboxError(f"{root} is not empty", "give each sandbox a folder of its own")

    def check(self, root: Path) -> dict[str, object]:
        """The ``sandbox.json`` in ``root``, refused unless it is this sandbox's."""
        if not (root / META).is_file():
            raise SandboxError(f"no {self.strategy} sandbox in {root}", "create it first")
        meta = read_json_object(root / META)
        if any(meta.get(key) != value for key, value in asdict(self).items()):
            raise SandboxError(
                f"the sandbox in {root} is not the {self.strategy} sandbox of "
                f"{self.resource_id} at {self.location} for plan {self.plan_id}",
                "check the folder, the plan and the resource",
            )
        return meta


def resource_directory(resource: Resource) -> Path:
    """The real directory a filesystem resource names, resolved once."""
    path = Path(resource.location).expanduser()
    if not path.is_absolute() or not path.is_dir():
        raise SandboxError(
            f"resource {resource.resource_id}: {resource.location!r} is not a directory",
            "give the absolute path of an existing directory",
        )
    return path.resolve()


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, _CHUNK):
        chunks.append(chunk)
    return b"".join(chunks)


def hash_fd(fd: int) -> str:
    """sha256 of what ``fd`` reads to its end, without storing it."""
    digest = hashlib.sha256()
    while chunk := os.read(fd, _CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


def open_regular(dir_fd: int, name: str) -> int:
    """Open a regular file for reading; a symlink, FIFO or device is refused, not followed."""
    fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SandboxError(f"{name!r} is not a regular file", "remove it or replace it with a file")
    return fd


# --- objects -----------------------------------------------------------------------------------


class _PackWriter:
    """The objects of one batch, appended to one temporary file that becomes a pack."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
        _write_all(self.fd, _PACK_MAGIC)
        self.end = len(_PACK_MAGIC)
        self.entries: dict[str, tuple[int, int]] = {}

    def add(self, oid: str, packed: bytes) -> None:
        _write_all(self.fd, packed)
        self.entries[oid] = (self.end, len(packed))
        self.end += len(packed)

    def finish(self, *, durable: bool) -> None:
        """Append the index (id, offset, length per object) and the trailer locating it."""
        rows = [
            _IDX_ROW.pack(bytes.fromhex(oid), offset, length)
            for oid, (offset, length) in self.entries.items()
        ]
        _write_all(self.fd, b"".join(rows) + _TRAILER.pack(self.end, len(rows), _PACK_END))
        if durable:
            os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)
        self.path.unlink(missing_ok=True)


def _read_pack_index(path: Path) -> Iterator[tuple[str, int, int]]:
    """The (id, offset, length) rows at the end of a pack; a damaged pack is refused."""
    with open(path, "rb") as pack:
        size = pack.seek(0, os.SEEK_END)
        if size < len(_PACK_MAGIC) + _TRAILER.size:
            raise CheckpointMissingError(f"pack {path.name} is truncated", "the sandbox is damaged")
        pack.seek(size - _TRAILER.size)
        start, count, end = _TRAILER.unpack(pack.read(_TRAILER.size))
        if end != _PACK_END or start + count * _IDX_ROW.size + _TRAILER.size != size:
            raise CheckpointMissingError(f"pack {path.name} is damaged", "the sandbox is damaged")
        pack.seek(start)
        rows = pack.read(count * _IDX_ROW.size)
    for raw, offset, length in _IDX_ROW.iter_unpack(rows):
        if offset < len(_PACK_MAGIC) or offset + length > start:
            raise CheckpointMissingError(f"pack {path.name} is damaged", "the sandbox is damaged")
        yield raw.hex(), offset, length


class ObjectStore:
    """Immutable blobs named by the sha256 of their content, zlib-compressed on disk.

    An object is either *loose* (its own file, ``ab/cdef...``) or in a *pack*: the objects
    put inside one :meth:`batch` (a checkpoint's changed files and trees, or a whole tree
    when a sandbox is made) are appended to a single file, ``packs/<name>.pack``, which
    ends with the index of their offsets. Creating a file costs far more than appending to
    one, so a checkpoint of ten changed files writes one pack, not thirty files.
    Every read is checked against the object's id, wherever it was stored.

    ``durable`` flushes packs, and loose objects at :meth:`sync`, to the disk, so a
    checkpoint reference handed to the database never outlives what it names.
    """

    def __init__(self, root: Path, *, durable: bool) -> None:
        self.root = root
        self._durable = durable
        self._tmp = root / "tmp"
        self._packs = root / "packs"
        self._pending: list[Path] = []
        self._verified: dict[str, tuple[str, int, int, int]] = {}
        self._index: dict[str, tuple[str, int, int]] | None = None
        self._writer: _PackWriter | None = None
        self._open_packs: OrderedDict[str, io.FileIO] = OrderedDict()

    def create(self) -> None:
        self._tmp.mkdir(parents=True, exist_ok=True)
        self._packs.mkdir(exist_ok=True)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Objects put inside go to one pack, published when the block ends without error."""
        if self._writer is not None:
            yield
            return
        writer = self._writer = _PackWriter(self._tmp / f"{secrets.token_hex(8)}.pack")
        try:
            yield
            self._publish(writer)
        finally:
            self._writer = None
            writer.close()

    def has(self, oid: str) -> bool:
        check_oid(oid)
        writer = self._writer
        if (writer is not None and oid in writer.entries) or oid in self._pack_index():
            return True
        return os.path.exists(self._loose(oid))

    def put_bytes(self, data: bytes) -> str:
        oid = hashlib.sha256(data).hexdigest()
        if not self.has(oid):
            self._put_packed(oid, zlib.compress(data, 1))
        return oid

    def put_fd(self, fd: int) -> tuple[str, int]:
        """Store what ``fd`` reads; returns (object id, size). Large files are streamed."""
        first = os.read(fd, _SMALL_FILE)
        if len(first) < _SMALL_FILE:
            rest = _read_all(fd)
            data = first + rest if rest else first
            return self.put_bytes(data), len(data)
        digest = hashlib.sha256(first)
        packer = zlib.compressobj(1)
        size = len(first)
        tmp_fd, tmp = self._new_tmp()
        try:
            _write_all(tmp_fd, packer.compress(first))
            while chunk := os.read(fd, _CHUNK):
                digest.update(chunk)
                size += len(chunk)
                _write_all(tmp_fd, packer.compress(chunk))
            _write_all(tmp_fd, packer.flush())
        finally:
            os.close(tmp_fd)
        oid = digest.hexdigest()
        if self.has(oid):
            tmp.unlink()
        else:
            self._link(oid, tmp)
        return oid, size

    def read_bytes(self, oid: str, limit: int = _MAX_TREE_BYTES) -> bytes:
        """The object's content, checked against its id; at most ``limit`` bytes."""
        return b"".join(self._checked(oid, limit))

    def copy_to_fd(self, oid: str, fd: int, size: int) -> None:
        """Write the object's ``size`` bytes to ``fd``, checking size and hash as it streams."""
        written = 0
        for data in self._checked(oid, size):
            _write_all(fd, data)
            written += len(data)
        if written != size:
            raise self._missing(oid, "shorter than recorded")

    def check(self, oid: str) -> None:
        """Raise CheckpointMissingError unless the object exists and matches its id.

        Objects never change once written, so one whose file (or place in a pack) is the
        same as when it was last hashed in this process is not read again.
        """
        key = self._location(oid)
        if key is None:
            raise self._missing(oid, "not stored")
        if key[0] and self._verified.get(oid) != key:
            self.read_bytes(oid, limit=1 << 62)
            self._verified[oid] = key

    def sync(self) -> None:
        """Flush loose objects written since the last call to the disk (durable stores only)."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        for path in pending:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        for folder in {p.parent for p in pending}:
            fsync_dir(folder)
        fsync_dir(self.root)

    def oids(self) -> set[str]:
        found = set(self._pack_index())
        for fan in os.scandir(self.root):
            if len(fan.name) == 2 and fan.is_dir(follow_symlinks=False):
                found.update(fan.name + item.name for item in os.scandir(fan.path))
        return found

    def sweep(self, keep: set[str]) -> int:
        """Delete every object not in ``keep`` (repacking packs that are partly needed).

        Also removes temporary files a crash left behind.
        """
        removed = 0
        for fan in os.scandir(self.root):
            if len(fan.name) == 2 and fan.is_dir(follow_symlinks=False):
                for item in os.scandir(fan.path):
                    if fan.name + item.name not in keep:
                        os.unlink(item.path)
                        removed += 1
        by_pack: dict[str, list[tuple[str, int, int]]] = {}
        for oid, (name, offset, length) in self._pack_index().items():
            by_pack.setdefault(name, []).append((oid, offset, length))
        for name, rows in by_pack.items():
            live = [row for row in rows if row[0] in keep]
            if len(live) < len(rows):
                self._repack(name, live)
                removed += len(rows) - len(live)
        for tmp in self._tmp.iterdir():
            tmp.unlink(missing_ok=True)
        self._verified = {k: v for k, v in self._verified.items() if k in keep}
        return removed

    # --- where objects live ------------------------------------------------------------------

    def _loose(self, oid: str) -> Path:
        return self.root / oid[:2] / oid[2:]

    def _location(self, oid: str) -> tuple[str, int, int, int] | None:
        """Where ``oid`` is: ("", ...) pending in the open batch, a pack and offset, or a file."""
        check_oid(oid)
        writer = self._writer
        if writer is not None and oid in writer.entries:
            return ("", 0, 0, 0)
        packed = self._pack_index().get(oid)
        if packed is not None:
            return packed[0], packed[1], packed[2], 0
        try:
            st = os.stat(self._loose(oid))
        except FileNotFoundError:
            return None
        return "loose", st.st_size, st.st_mtime_ns, st.st_ino

    def _pack_index(self) -> dict[str, tuple[str, int, int]]:
        if self._index is None:
            index: dict[str, tuple[str, int, int]] = {}
            for pack in sorted(self._packs.glob("*.pack")):
                try:
                    rows = list(_read_pack_index(pack)) if _PACK_NAME.match(pack.stem) else []
                except (OSError, CheckpointMissingError):
                    continue  # its objects count as missing: checkpoints needing them fail verify
                for oid, offset, length in rows:
                    index[oid] = (pack.stem, offset, length)
            self._index = index
        return self._index

    def _compressed(self, oid: str) -> Iterator[bytes]:
        check_oid(oid)
        writer = self._writer
        if writer is not None and oid in writer.entries:
            offset, length = writer.entries[oid]
            yield from _pread(writer.fd, offset, length)
            return
        packed = self._pack_index().get(oid)
        if packed is not None:
            name, offset, length = packed
            yield from _pread(self._pack_file(name).fileno(), offset, length)
            return
        with open(self._loose(oid), "rb") as loose:
            while chunk := loose.read(_CHUNK):
                yield chunk

    def _checked(self, oid: str, limit: int) -> Iterator[bytes]:
        """The object's content in pieces; raises at the end if it does not match its id."""
        digest = hashlib.sha256()
        total = 0
        unpacker = zlib.decompressobj()
        try:
            for chunk in self._compressed(oid):
                while chunk:
                    data = unpacker.decompress(chunk, _CHUNK)
                    chunk = unpacker.unconsumed_tail
                    total += len(data)
                    if total > limit:
                        raise self._missing(oid, "longer than recorded")
                    digest.update(data)
                    yield data
            data = unpacker.flush()
            total += len(data)
            if total > limit or not unpacker.eof:
                raise self._missing(oid, "truncated or too long")
            digest.update(data)
            yield data
        except (OSError, zlib.error) as exc:
            raise self._missing(oid, exc) from exc
        if digest.hexdigest() != oid:
            raise self._missing(oid, "content does not match its id")

    def _pack_file(self, name: str) -> io.FileIO:
        """An open pack (a few stay open: a rollback reads hundreds of objects from each)."""
        handle = self._open_packs.pop(name, None)
        if handle is None:
            handle = io.FileIO(self._packs / f"{name}.pack", "r")
        self._open_packs[name] = handle
        if len(self._open_packs) > 16:
            self._open_packs.popitem(last=False)[1].close()
        return handle

    # --- writing -----------------------------------------------------------------------------

    def _put_packed(self, oid: str, packed: bytes) -> None:
        if self._writer is not None:
            self._writer.add(oid, packed)
            return
        fd, tmp = self._new_tmp()
        try:
            _write_all(fd, packed)
        finally:
            os.close(fd)
        self._link(oid, tmp)

    def _publish(self, writer: _PackWriter) -> None:
        if not writer.entries:
            return
        writer.finish(durable=self._durable)
        name = secrets.token_hex(8)
        os.rename(writer.path, self._packs / f"{name}.pack")
        if self._durable:
            fsync_dir(self._packs)
        index = self._pack_index()
        for oid, (offset, length) in writer.entries.items():
            index[oid] = (name, offset, length)
            self._verified[oid] = (name, offset, length, 0)

    def _repack(self, name: str, live: list[tuple[str, int, int]]) -> None:
        """Replace pack ``name`` by one holding only ``live`` (copied, not recompressed)."""
        if live:
            source = os.open(self._packs / f"{name}.pack", os.O_RDONLY | os.O_CLOEXEC)
            writer = _PackWriter(self._tmp / f"{secrets.token_hex(8)}.pack")
            try:
                for oid, offset, length in live:
                    writer.add(oid, b"".join(_pread(source, offset, length)))
                self._publish(writer)
            finally:
                os.close(source)
                writer.close()
        index = self._pack_index()
        for oid in [oid for oid, row in index.items() if row[0] == name]:
            del index[oid]
        handle = self._open_packs.pop(name, None)
        if handle is not None:
            handle.close()
        (self._packs / f"{name}.pack").unlink(missing_ok=True)

    def _missing(self, oid: str, why: object) -> CheckpointMissingError:
        return CheckpointMissingError(
            f"object {oid[:12]} is missing or damaged ({why})",
            "the checkpoint cannot be used; roll back to another one",
        )

    def _new_tmp(self) -> tuple[int, Path]:
        tmp = self._tmp / secrets.token_hex(8)
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444), tmp

    def _link(self, oid: str, tmp: Path) -> None:
        final = self._loose(oid)
        try:
            os.rename(tmp, final)
        except FileNotFoundError:
            final.parent.mkdir(exist_ok=True)
            os.rename(tmp, final)
        if self._durable:
            self._pending.append(final)


def _pread(fd: int, offset: int, length: int) -> Iterator[bytes]:
    while length > 0:
        data = os.pread(fd, min(length, _CHUNK), offset)
        if not data:
            raise OSError(errno.EIO, "pack is truncated")
        offset += len(data)
        length -= len(data)
        yield data


# --- trees -------------------------------------------------------------------------------------


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


# --- writing a directory tree safely -----------------------------------------------------------


def remove_at(dir_fd: int, name: str) -> None:
    """Remove ``name`` under ``dir_fd`` (recursively for a directory), never following links."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=dir_fd)
        return
    fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    try:
        if st.st_mode & 0o700 != 0o700:
            os.fchmod(fd, 0o700)
        for child in os.listdir(fd):
            remove_at(fd, child)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything under it (read-only folders included)."""
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        remove_at(fd, path.name)
    except FileNotFoundError:
        pass
    finally:
        os.close(fd)


class TreeWriter:
    """Changes a directory tree by relative path without ever leaving it.

    Each directory on the way is opened with ``O_NOFOLLOW`` relative to its parent's
    descriptor, so a symlink planted anywhere on a path makes the operation fail instead of
    writing through it. Files are written to a temporary name and renamed into place. A
    directory without owner write permission is opened up while it is worked in and given
    its mode back on :meth:`close` (unless :meth:`set_mode` sets a new one).
    """

    def __init__(self, root: Path, *, durable: bool) -> None:
        self._durable = durable
        self._fds: dict[str, int] = {"": os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)}
        self._opened_up: dict[str, int] = {}
        self._writable: set[str] = set()
        self._touched: set[str] = set()

    def __enter__(self) -> TreeWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            for rel, mode in self._opened_up.items():
                os.fchmod(self._fds[rel], mode)
            if self._durable:
                for rel in self._touched:
                    if rel in self._fds:
                        os.fsync(self._fds[rel])
        finally:
            for fd in self._fds.values():
                os.close(fd)
            self._fds.clear()

    def lstat(self, rel: str) -> os.stat_result | None:
        try:
            fd, name = self._parent(rel, write=False)
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError, SandboxError):
            return None

    def remove(self, rel: str) -> None:
        fd, name = self._parent(rel)
        for cached in [k for k in self._fds if k == rel or k.startswith(rel + "/")]:
            os.close(self._fds.pop(cached))
            self._opened_up.pop(cached, None)
            self._writable.discard(cached)
        try:
            remove_at(fd, name)
        except FileNotFoundError:
            return

    def make_dir(self, rel: str) -> None:
        """Create a directory (owner-only for now; :meth:`set_mode` gives its final mode)."""
        fd, name = self._parent(rel)
        try:
            os.mkdir(name, 0o700, dir_fd=fd)
        except FileExistsError:
            if not stat.S_ISDIR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                raise
        self._touched.add(rel)

    def write_object(
        self,
        rel: str,
        store: ObjectStore,
        entry: Entry,
        *,
        mtime_ns: int | None,
        in_place: bool = False,
    ) -> os.stat_result:
        """Replace ``rel`` by the blob ``entry.ref`` with ``entry.mode``; returns its lstat.

        ``in_place`` writes straight to ``rel`` (rewriting an existing regular file with one
        link through its own inode) instead of to a new file renamed over it: creating a
        file costs ten times more than rewriting one, but a crash can leave the file
        half-written, so it is for the sandbox's copy (which a rollback can redo), not for
        the real directory.
        """
        fd, name = self._parent(rel)
        if in_place:
            st = self._overwrite(fd, name, store, entry, mtime_ns)
            if st is not None:
                return st
        tmp = f".cleveragents-{secrets.token_hex(6)}.tmp"
        out = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=fd,
        )
        try:
            store.copy_to_fd(entry.ref, out, entry.size)
            os.fchmod(out, entry.mode)
            if mtime_ns is not None:
                os.utime(out, ns=(mtime_ns, mtime_ns))
            if self._durable:
                os.fsync(out)
        except BaseException:
            os.close(out)
            os.unlink(tmp, dir_fd=fd)
            raise
        os.close(out)
        os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        return os.stat(name, dir_fd=fd, follow_symlinks=False)

    def _overwrite(
        self, fd: int, name: str, store: ObjectStore, entry: Entry, mtime_ns: int | None
    ) -> os.stat_result | None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            out = os.open(name, flags, 0o600, dir_fd=fd)
        except OSError:  # a symlink, a FIFO, a directory, not writable: use a new file
            return None
        try:
            st = os.fstat(out)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                return None
            store.copy_to_fd(entry.ref, out, entry.size)
            if st.st_size > entry.size:
                os.ftruncate(out, entry.size)
            os.fchmod(out, entry.mode)
            if mtime_ns is not None:
                os.utime(out, ns=(mtime_ns, mtime_ns))
            return os.fstat(out)
        finally:
            os.close(out)

    def symlink(self, rel: str, target: str) -> None:
        check_link_target(rel, target)
        fd, name = self._parent(rel)
        try:
            os.symlink(target, name, dir_fd=fd)
        except FileExistsError:
            remove_at(fd, name)
            os.symlink(target, name, dir_fd=fd)

    def set_mode(self, rel: str, mode: int) -> None:
        """chmod ``rel`` (a file or directory; a symlink is refused, never followed)."""
        if rel in self._fds:
            os.fchmod(self._fds[rel], mode)
            self._opened_up.pop(rel, None)
            return
        fd, name = self._parent(rel)
        try:
            target = os.open(name, READ_FLAGS, dir_fd=fd)
        except PermissionError:  # an unreadable file: lstat shows it is not a link
            if stat.S_ISLNK(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode):
                raise
            os.chmod(name, mode, dir_fd=fd)
            return
        try:
            os.fchmod(target, mode)
        finally:
            os.close(target)

    def set_mtime(self, rel: str, mtime_ns: int) -> os.stat_result:
        fd, name = self._parent(rel)
        os.utime(name, ns=(mtime_ns, mtime_ns), dir_fd=fd, follow_symlinks=False)
        return os.stat(name, dir_fd=fd, follow_symlinks=False)

    def _parent(self, rel: str, *, write: bool = True) -> tuple[int, str]:
        check_entry_path(rel)
        parent, name = split_path(rel)
        fd = self._dir(parent)
        if write:
            failpoints.hit("fs.write", "tree")
            self._touched.add(parent)
            if parent not in self._writable:
                mode = os.fstat(fd).st_mode
                if mode & 0o300 != 0o300:
                    os.fchmod(fd, stat.S_IMODE(mode) | 0o700)
                    self._opened_up.setdefault(parent, stat.S_IMODE(mode))
                self._writable.add(parent)
        return fd, name

    def _dir(self, rel: str) -> int:
        fd = self._fds.get(rel)
        if fd is None:
            parent, name = split_path(rel)
            try:
                fd = os.open(name, DIR_FLAGS, dir_fd=self._dir(parent))
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise SandboxError(
                        f"{rel!r} is not a directory (a symlink or file is in the way)",
                        "nothing was written through it; remove it and retry",
                    ) from exc
                raise
            self._fds[rel] = fd
        return fd


def open_path_dir(root: Path, rel: str) -> int:
    """Open directory ``rel`` under ``root`` without following any symlink on the way."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for part in rel.split("/") if rel else ():
        try:
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
        finally:
            os.close(fd)
        fd = child
    return fd


def lstat_path(root: Path, rel: str) -> os.stat_result | None:
    """lstat ``rel`` under ``root``; None when it, or a real directory on the way, is absent."""
    parent, name = split_path(rel)
    try:
        fd = open_path_dir(root, parent)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    finally:
        os.close(fd)


def read_path(root: Path, rel: str) -> bytes:
    """The bytes of regular file ``rel`` under ``root``, following no symlink."""
    parent, name = split_path(rel)
    fd = open_path_dir(root, parent)
    try:
        file_fd = open_regular(fd, name)
    finally:
        os.close(fd)
    try:
        return _read_all(file_fd)
    finally:
        os.close(file_fd)


def hash_path(root: Path, rel: str) -> str:
    parent, name = split_path(rel)
    fd = open_path_dir(root, parent)
    try:
        file_fd = open_regular(fd, name)
    finally:
        os.close(fd)
    try:
        return hash_fd(file_fd)
    finally:
        os.close(file_fd)


def readlink_path(root: Path, rel: str) -> str:
    parent, name = split_path(rel)
    fd = open_path_dir(root, parent)
    try:
        return os.readlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def list_path(root: Path, rel: str) -> list[str]:
    """Names in directory ``rel`` under ``root`` (empty when it is not a real directory)."""
    try:
        fd = open_path_dir(root, rel)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return []
        raise
    try:
        return os.listdir(fd)
    finally:
        os.close(fd)


# --- landing changes on the real directory -----------------------------------------------------


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
