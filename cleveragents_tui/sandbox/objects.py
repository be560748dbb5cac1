"""The object store of the filesystem_copy and overlay sandboxes (see :class:`ObjectStore`)."""

from __future__ import annotations

import errno
import hashlib
import io
import os
import re
import secrets
import struct
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cleveragents_tui.sandbox.base import CheckpointMissingError
from cleveragents_tui.sandbox.files import CHUNK, fsync_dir, read_all, write_all
from cleveragents_tui.sandbox.names import check_oid

_PACK_NAME = re.compile(r"^[0-9a-f]{16}$")
_PACK_MAGIC = b"CAPACK1\n"
_PACK_END = b"CAPACKZ\n"
_IDX_ROW = struct.Struct("<32sQQ")
_TRAILER = struct.Struct("<QQ8s")
_SMALL_FILE = 4 << 20
_MAX_TREE_BYTES = 256 << 20


class _PackWriter:
    """The objects of one batch, appended to one temporary file that becomes a pack."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
        write_all(self.fd, _PACK_MAGIC)
        self.end = len(_PACK_MAGIC)
        self.entries: dict[str, tuple[int, int]] = {}

    def add(self, oid: str, packed: bytes) -> None:
        write_all(self.fd, packed)
        self.entries[oid] = (self.end, len(packed))
        self.end += len(packed)

    def finish(self, *, durable: bool) -> None:
        """Append the index (id, offset, length per object) and the trailer locating it."""
        rows = [
            _IDX_ROW.pack(bytes.fromhex(oid), offset, length)
            for oid, (offset, length) in self.entries.items()
        ]
        write_all(self.fd, b"".join(rows) + _TRAILER.pack(self.end, len(rows), _PACK_END))
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
            rest = read_all(fd)
            data = first + rest if rest else first
            return self.put_bytes(data), len(data)
        digest = hashlib.sha256(first)
        packer = zlib.compressobj(1)
        size = len(first)
        tmp_fd, tmp = self._new_tmp()
        try:
            write_all(tmp_fd, packer.compress(first))
            while chunk := os.read(fd, CHUNK):
                digest.update(chunk)
                size += len(chunk)
                write_all(tmp_fd, packer.compress(chunk))
            write_all(tmp_fd, packer.flush())
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
            write_all(fd, data)
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
            while chunk := loose.read(CHUNK):
                yield chunk

    def _checked(self, oid: str, limit: int) -> Iterator[bytes]:
        """The object's content in pieces; raises at the end if it does not match its id."""
        digest = hashlib.sha256()
        total = 0
        unpacker = zlib.decompressobj()
        try:
            for chunk in self._compressed(oid):
                while chunk:
                    data = unpacker.decompress(chunk, CHUNK)
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
            write_all(fd, packed)
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
        data = os.pread(fd, min(length, CHUNK), offset)
        if not data:
            raise OSError(errno.EIO, "pack is truncated")
        offset += len(data)
        length -= len(data)
        yield data
