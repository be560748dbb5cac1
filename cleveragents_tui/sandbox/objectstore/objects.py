"""The object store of the filesystem_copy and overlay sandboxes (see :class:`ObjectStore`).

Layout of the store's folder::

    packs/<name>.log    journals: the batches of one store object, appended (:mod:`.packs`)
    packs/<name>.pack   packs written whole: a batch of more than 1 MiB (a sandbox being
                        made), or what :meth:`ObjectStore.sweep` kept of another file
    ab/cdef...          loose objects: files of 4 MiB or more, and objects put outside a batch
    tmp/                files being written
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import secrets
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cleveragents_tui.sandbox.base import CheckpointMissingError
from cleveragents_tui.sandbox.objectstore.files import CHUNK, STEP, fsync_dir, write_all
from cleveragents_tui.sandbox.objectstore.names import check_oid
from cleveragents_tui.sandbox.objectstore.packs import (
    JOURNAL_LIMIT,
    MAGIC,
    NAME,
    SEGMENT_LIMIT,
    Journal,
    PendingBatch,
    Segment,
    read_journal,
    read_pack,
    write_pack,
)

_SMALL_FILE = 4 << 20
_MAX_TREE_BYTES = 256 << 20


def _keep_every_note(note: bytes) -> bool:
    return True


def encode_note(**fields: object) -> bytes:
    """A note as the sandboxes store them (:meth:`ObjectStore.add_note`): version-1 JSON."""
    return json.dumps({"v": 1, **fields}, sort_keys=True).encode()


def decode_note(note: bytes) -> dict[str, Any] | None:
    """The fields of a note :func:`encode_note` made; None for anything else."""
    try:
        doc = json.loads(note)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        return None
    return doc if isinstance(doc, dict) and doc.get("v") == 1 else None


class ObjectStore:
    """Immutable blobs named by the sha256 of their content, zlib-compressed on disk.

    An object is either *loose* (its own file, ``ab/cdef...``) or in a pack file. The
    objects put inside one :meth:`batch` (a checkpoint's changed files and trees), and the
    notes added to it (:meth:`add_note`: the checkpoint's record), become one segment of
    this object's journal: creating files costs far more than appending to one, so a
    checkpoint of ten changed files appends once, instead of writing thirty files.
    Every read is checked against the object's id, wherever it was stored.

    ``durable`` flushes each batch to the disk before the batch ends (one ``fdatasync`` of
    the journal; loose objects first, so a note never reaches the disk before an object it
    names), so a checkpoint reference handed to the database never outlives what it names.
    Loose objects put outside a batch are flushed by :meth:`sync`.

    One store object writes a folder at a time (the plan lock sees to that); others may read.
    """

    def __init__(self, root: Path, *, durable: bool) -> None:
        self.root = root
        self._durable = durable
        self._tmp = root / "tmp"
        self._packs = root / "packs"
        self._pending: list[Path] = []
        self._verified: dict[str, tuple[str, int, int, int]] = {}
        self._sizes: dict[str, int] = {}  # content sizes of the objects verified
        self._index: dict[str, tuple[str, int, int]] | None = None
        self._notes: list[tuple[str, bytes]] = []
        self._batch: PendingBatch | None = None
        self._journal: Journal | None = None
        self._open_packs: OrderedDict[str, io.FileIO] = OrderedDict()
        self._finalizer: weakref.finalize[[], ObjectStore] | None = None

    def create(self) -> None:
        self._tmp.mkdir(parents=True, exist_ok=True)
        self._packs.mkdir(exist_ok=True)

    @contextmanager
    def batch(self, *, durable: bool | None = None) -> Iterator[None]:
        """Objects put inside, and notes added, are stored together when the block ends
        without error (nothing of them when it raises). ``durable=False`` skips the flush,
        for what a crash may lose (a cache); None means the store's setting."""
        if self._batch is not None:
            yield
            return
        batch = self._batch = PendingBatch(self._tmp)
        try:
            yield
            self._publish(batch, self._durable if durable is None else durable)
        finally:
            self._batch = None
            batch.close()

    @contextmanager
    def scratch(self) -> Iterator[None]:
        """Objects put inside are readable until the block ends, then forgotten: nothing of
        them reaches a pack, nothing is flushed for them (what is read once and never named,
        a correction's diff of the state now). Files of 4 MiB or more still go loose, and
        are flushed when the block ends (a durable store), as a checkpoint flushes them: a
        later checkpoint may find them there and name them."""
        if self._batch is not None:
            raise RuntimeError("scratch cannot be opened inside a batch")
        batch = self._batch = PendingBatch(self._tmp)
        try:
            yield
        finally:
            self._batch = None
            batch.close()
        self.sync()

    def add_note(self, note: bytes) -> None:
        """Store ``note`` with the objects of the open batch (read back by :meth:`notes`)."""
        if self._batch is None:
            raise RuntimeError("add_note needs an open batch")
        self._batch.notes.append(note)

    def notes(self) -> list[bytes]:
        """Every note stored, oldest first within each pack file."""
        self._pack_index()
        return [note for _, note in self._notes]

    def refresh(self) -> None:
        """Forget what was read of the pack files, to see what another process added."""
        self._index = None
        self._notes = []

    def has(self, oid: str) -> bool:
        check_oid(oid)
        batch = self._batch
        if (batch is not None and oid in batch.entries) or oid in self._pack_index():
            return True
        return os.path.exists(self._loose(oid))

    def put_bytes(self, data: bytes) -> str:
        oid = hashlib.sha256(data).hexdigest()
        if not self.has(oid):
            self._put_packed(oid, zlib.compress(data, 1))
        return oid

    def put_fd(self, fd: int, size_hint: int = 0) -> tuple[str, int]:
        """Store what ``fd`` reads; returns (object id, size). Files of 4 MiB or more are
        streamed into a loose object. ``size_hint`` (the size lstat gave) sizes the reads:
        a read allocates the whole size asked for, which costs more than reading 2 KiB."""
        step = min(size_hint + 1, STEP) if size_hint else STEP
        pieces: list[bytes] = []
        total = 0
        while total < _SMALL_FILE and (piece := os.read(fd, step)):
            pieces.append(piece)
            total += len(piece)
        first = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        if total < _SMALL_FILE:
            return self.put_bytes(first), total
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
            os.unlink(tmp)
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

    def check(self, oid: str, size: int | None = None) -> None:
        """Raise CheckpointMissingError unless the object exists, matches its id, and (given
        ``size``) holds that many bytes — so a tree that lies about a size is refused before
        a restore changes anything.

        Objects never change once written, so one whose file (or place in a pack) is the
        same as when it was last hashed in this process is not read again.
        """
        key = self._location(oid)
        if key is None:
            raise self._missing(oid, "not stored")
        if not key[0]:
            return  # pending in the open batch: this store wrote it just now
        if self._verified.get(oid) != key or oid not in self._sizes:
            self._sizes[oid] = len(self.read_bytes(oid, limit=1 << 62))
            self._verified[oid] = key
        if size is not None and self._sizes[oid] != size:
            raise self._missing(oid, f"{self._sizes[oid]} bytes where the tree records {size}")

    def stored_size(self, oid: str) -> int:
        """The bytes ``oid`` takes on the disk, compressed (its pack row not counted)."""
        key = self._location(oid)
        if key is None:
            raise self._missing(oid, "not stored")
        if key[0] == "loose":
            return key[1]
        if not key[0] and self._batch is not None:  # pending in the open batch
            return self._batch.entries[oid][1]
        return key[2]

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

    def sweep(self, keep: set[str], keep_note: Callable[[bytes], bool] = _keep_every_note) -> int:
        """Delete every object not in ``keep`` and every note ``keep_note`` rejects (pack
        files partly needed are rewritten); returns how many objects went.

        Also removes temporary files a crash left behind.
        """
        removed = 0
        for fan in os.scandir(self.root):
            if len(fan.name) == 2 and fan.is_dir(follow_symlinks=False):
                for item in os.scandir(fan.path):
                    if fan.name + item.name not in keep:
                        os.unlink(item.path)
                        removed += 1
        self._pending = [path for path in self._pending if path.parent.name + path.name in keep]
        by_file: dict[str, tuple[list[tuple[str, int, int]], list[bytes]]] = {}
        for oid, (name, offset, length) in self._pack_index().items():
            by_file.setdefault(name, ([], []))[0].append((oid, offset, length))
        for name, note in self._notes:
            by_file.setdefault(name, ([], []))[1].append(note)
        for name, (rows, notes) in by_file.items():
            live = [row for row in rows if row[0] in keep]
            kept = [note for note in notes if keep_note(note)]
            if len(live) < len(rows) or len(kept) < len(notes):
                self._repack(name, live, kept)
                removed += len(rows) - len(live)
        for tmp in self._tmp.iterdir():
            tmp.unlink(missing_ok=True)
        self._verified = {k: v for k, v in self._verified.items() if k in keep}
        self._sizes = {k: v for k, v in self._sizes.items() if k in keep}
        return removed

    # --- where objects live ------------------------------------------------------------------

    def _loose(self, oid: str) -> str:
        return f"{self.root}/{oid[:2]}/{oid[2:]}"

    def _location(self, oid: str) -> tuple[str, int, int, int] | None:
        """Where ``oid`` is: ("", ...) pending in the open batch, a pack and offset, or a file."""
        check_oid(oid)
        batch = self._batch
        if batch is not None and oid in batch.entries:
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
        """Every packed object's (file, offset, length), read once; notes alongside."""
        if self._index is None:
            index: dict[str, tuple[str, int, int]] = {}
            notes: list[tuple[str, bytes]] = []
            names = [p.name for p in self._packs.iterdir()] if self._packs.is_dir() else []
            for name in sorted(filter(NAME.match, names)):
                self._take(name, self._read_segments(name), index, notes)
            self._index, self._notes = index, notes
        return self._index

    def _read_segments(self, name: str) -> list[Segment]:
        try:
            if name.endswith(".log"):
                return read_journal(self._packs / name)
            return read_pack(self._packs / name)
        except (OSError, CheckpointMissingError):
            return []  # its objects count as missing: checkpoints needing them fail verify

    @staticmethod
    def _take(
        name: str,
        segments: list[Segment],
        index: dict[str, tuple[str, int, int]],
        notes: list[tuple[str, bytes]],
    ) -> None:
        for segment in segments:
            for oid, offset, length in segment.rows:
                index[oid] = (name, offset, length)
            notes.extend((name, note) for note in segment.notes)

    def _compressed(self, oid: str) -> Iterator[bytes]:
        check_oid(oid)
        batch = self._batch
        if batch is not None and oid in batch.entries:
            yield batch.read(oid)
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
            handle = io.FileIO(self._packs / name, "r")
        self._open_packs[name] = handle
        if len(self._open_packs) > 16:
            self._open_packs.popitem(last=False)[1].close()
        return handle

    # --- writing -----------------------------------------------------------------------------

    def _put_packed(self, oid: str, packed: bytes) -> None:
        if self._batch is not None:
            self._batch.add(oid, packed)
            return
        fd, tmp = self._new_tmp()
        try:
            write_all(fd, packed)
        finally:
            os.close(fd)
        self._link(oid, tmp)

    def _publish(self, batch: PendingBatch, durable: bool) -> None:
        """Store a finished batch: appended to the journal, or a pack of its own if large."""
        if not batch.entries and not batch.notes:
            return
        if durable:
            self.sync()
        if batch.size > SEGMENT_LIMIT:
            name = batch.finish_pack(self._packs, durable=durable)
            start = len(MAGIC)
        else:
            segment = batch.segment()
            journal = self._journal
            if journal is None or journal.end + len(segment) > JOURNAL_LIMIT:
                journal = self._new_journal()
            start = journal.append(segment, durable=durable)
            name = journal.name
        index = self._pack_index()
        for oid, (offset, length) in batch.located(start).items():
            index[oid] = (name, offset, length)
            self._verified[oid] = (name, offset, length, 0)
        self._notes.extend((name, note) for note in batch.notes)

    def _new_journal(self) -> Journal:
        self._close_journal()
        journal = self._journal = Journal(self._packs)
        self._finalizer = weakref.finalize(self, journal.close)
        return journal

    def _close_journal(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._journal = self._finalizer = None

    def _repack(self, name: str, live: list[tuple[str, int, int]], notes: list[bytes]) -> None:
        """Replace pack file ``name`` by a pack of only ``live`` (copied, not recompressed)
        and ``notes``; the old file goes once the new one is on the disk."""
        index = self._pack_index()
        if live or notes:
            source = self._pack_file(name).fileno()
            objects = [(oid, b"".join(_pread(source, at, n))) for oid, at, n in live]
            new, located = write_pack(self._tmp, self._packs, objects, notes, durable=self._durable)
            for oid, (offset, length) in located.items():
                index[oid] = (new, offset, length)
                self._verified[oid] = (new, offset, length, 0)
            self._notes.extend((new, note) for note in notes)
        for oid in [oid for oid, row in index.items() if row[0] == name]:
            del index[oid]
        self._notes = [(file, note) for file, note in self._notes if file != name]
        handle = self._open_packs.pop(name, None)
        if handle is not None:
            handle.close()
        if self._journal is not None and self._journal.name == name:
            self._close_journal()
        (self._packs / name).unlink(missing_ok=True)

    def _missing(self, oid: str, why: object) -> CheckpointMissingError:
        return CheckpointMissingError(
            f"object {oid[:12]} is missing or damaged ({why})",
            "the checkpoint cannot be used; roll back to another one",
        )

    def _new_tmp(self) -> tuple[int, str]:
        tmp = f"{self._tmp}/{secrets.token_hex(8)}"
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444), tmp

    def _link(self, oid: str, tmp: str) -> None:
        final = self._loose(oid)
        try:
            os.rename(tmp, final)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.rename(tmp, final)
        if self._durable:
            self._pending.append(Path(final))


def _pread(fd: int, offset: int, length: int) -> Iterator[bytes]:
    while length > 0:
        data = os.pread(fd, min(length, CHUNK), offset)
        if not data:
            raise OSError(errno.EIO, "pack is truncated")
        offset += len(data)
        length -= len(data)
        yield data
