"""Pack files: how the object store keeps many objects, and notes, in one file.

A pack file is :data:`MAGIC` followed by *segments*, each the work of one batch::

    objects   the zlib streams, back to back
    rows      one per object: sha256 (32 bytes), offset in the segment, length (8 + 8)
    notes     each a 4-byte length and the bytes (what the strategy records with the batch)
    trailer   objects length (8), object count (4), notes length (4), CRC-32 of all of the
              segment before the CRC (4), and the mark ``CASEGZ2\\n`` (8)

Two kinds of file share the format. A ``.pack`` is written whole to a temporary name,
flushed and renamed into place, so it is never seen half-written. A ``.log`` is a
*journal*: one store object appends its batches to it, each followed by a single
``fdatasync`` (see :class:`Journal`). Only a journal's last segment can be torn by a crash,
so readers walk a journal back from its end, checking every segment's CRC, and step over a
segment that does not check by searching for the trailer mark before it.
"""

from __future__ import annotations

import os
import re
import secrets
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from cleveragents_tui import failpoints
from cleveragents_tui.sandbox.base import CheckpointMissingError
from cleveragents_tui.sandbox.objectstore.files import fsync_dir, write_all

MAGIC = b"CAPACK2\n"
NAME = re.compile(r"^[0-9a-f]{16}\.(?:pack|log)$")
_END = b"CASEGZ2\n"
_ROW = struct.Struct("<32sQQ")
_HEAD = struct.Struct("<QII")
_TRAILER = struct.Struct("<QIII8s")
_NOTE = struct.Struct("<I")
_AFTER_CRC = 12  # the CRC and the mark: the CRC covers the segment up to itself
# A batch keeps its objects in memory up to this size; past it they go to a temporary file
# that becomes a pack of its own (a sandbox being made stores a whole tree in one batch).
SPILL = 8 << 20
# A batch larger than this becomes a pack of its own too: readers check the CRC of every
# journal segment, and a pack (read by its index alone) opens faster than a large journal.
SEGMENT_LIMIT = 1 << 20
# A journal is closed, and a new one started, once it holds this much.
JOURNAL_LIMIT = 64 << 20
_fdatasync = getattr(os, "fdatasync", os.fsync)


@dataclass
class Segment:
    """One segment as read back: its objects' (id, offset in the file, length), its notes."""

    rows: list[tuple[str, int, int]] = field(default_factory=list)
    notes: list[bytes] = field(default_factory=list)


def _tail(objects: int, crc: int, rows: dict[str, tuple[int, int]], notes: list[bytes]) -> bytes:
    """Everything of a segment after its objects (whose length and CRC-32 are given)."""
    table = b"".join(_ROW.pack(bytes.fromhex(oid), at, n) for oid, (at, n) in rows.items())
    blob = b"".join(_NOTE.pack(len(note)) + note for note in notes)
    head = _HEAD.pack(objects, len(rows), len(blob))
    crc = zlib.crc32(head, zlib.crc32(blob, zlib.crc32(table, crc)))
    return table + blob + head + struct.pack("<I8s", crc, _END)


def _parse(meta: bytes | memoryview, start: int, objects: int, count: int) -> Segment:
    """The segment whose objects begin at file offset ``start``, from ``meta`` (its rows,
    then its notes); refused if they are inconsistent."""
    segment = Segment()
    for raw, at, length in _ROW.iter_unpack(meta[: count * _ROW.size]):
        if at + length > objects:
            raise ValueError("an object row points outside its segment")
        segment.rows.append((raw.hex(), start + at, length))
    blob = memoryview(meta)[count * _ROW.size :]
    i = 0
    while i < len(blob):
        if i + _NOTE.size > len(blob):
            raise ValueError("a note is cut short")
        (size,) = _NOTE.unpack_from(blob, i)
        i += _NOTE.size
        if i + size > len(blob):
            raise ValueError("a note is cut short")
        segment.notes.append(bytes(blob[i : i + size]))
        i += size
    return segment


def _trailer(raw: bytes | memoryview, end: int) -> tuple[int, int, int, int] | None:
    """(start, objects length, count, CRC) of the segment whose trailer ``raw`` ends at file
    offset ``end``, or None if ``raw`` is not a trailer."""
    objects, count, notes, crc, mark = _TRAILER.unpack(raw)
    start = end - _TRAILER.size - notes - count * _ROW.size - objects
    if mark != _END or start < len(MAGIC):
        return None
    return start, objects, count, crc


def read_pack(path: Path) -> list[Segment]:
    """The segments of a pack written whole; a damaged one raises CheckpointMissingError.

    Only the rows and notes are read (a pack may hold a whole tree); the objects are checked
    against their ids when they are read.
    """
    segments: list[Segment] = []
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        end = os.fstat(fd).st_size if os.pread(fd, len(MAGIC), 0) == MAGIC else -1
        while end >= len(MAGIC) + _TRAILER.size:
            at = _trailer(os.pread(fd, _TRAILER.size, end - _TRAILER.size), end)
            if at is None:
                break
            start, objects, count, _ = at
            meta = os.pread(fd, end - _TRAILER.size - start - objects, start + objects)
            try:
                segments.append(_parse(meta, start, objects, count))
            except ValueError:
                break
            end = start
    finally:
        os.close(fd)
    if end != len(MAGIC):
        raise CheckpointMissingError(f"pack {path.name} is damaged", "the sandbox is damaged")
    segments.reverse()
    return segments


def read_journal(path: Path) -> list[Segment]:
    """The segments of a journal whose CRC checks, oldest first (a torn end is skipped)."""
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        return []
    view = memoryview(data)
    segments: list[Segment] = []
    end = len(data)
    while end >= len(MAGIC) + _TRAILER.size:
        at = _trailer(view[end - _TRAILER.size : end], end)
        if at is not None:
            start, objects, count, crc = at
            if zlib.crc32(view[start : end - _AFTER_CRC]) == crc:
                try:
                    segments.append(
                        _parse(view[start + objects : end - _TRAILER.size], start, objects, count)
                    )
                    end = start
                    continue
                except ValueError:
                    pass
        # Not a whole segment (a crash cut it, or the disk damaged it): look for the trailer
        # mark of an earlier one; a false match is rejected by its CRC.
        mark = data.rfind(_END, len(MAGIC), end - 1)
        end = mark + len(_END) if mark >= 0 else 0
    segments.reverse()
    return segments


class PendingBatch:
    """A batch's objects and notes until it ends: in memory, or past :data:`SPILL` bytes in
    a temporary file (``MAGIC`` and the objects so far), which then becomes a pack."""

    def __init__(self, tmp: Path) -> None:
        self._tmp = tmp
        self.entries: dict[str, tuple[int, int]] = {}
        self.notes: list[bytes] = []
        self._memory: dict[str, bytes] = {}
        self._size = 0
        self._crc = 0
        self.spill: tuple[int, Path] | None = None

    def add(self, oid: str, packed: bytes) -> None:
        self.entries[oid] = (self._size, len(packed))
        self._size += len(packed)
        self._crc = zlib.crc32(packed, self._crc)
        if self.spill is not None:
            write_all(self.spill[0], packed)
            return
        self._memory[oid] = packed
        if self._size > SPILL:
            self._spill()

    @property
    def size(self) -> int:
        """The bytes of its objects."""
        return self._size

    def read(self, oid: str) -> bytes:
        """The compressed bytes of an object of this batch."""
        at, length = self.entries[oid]
        if self.spill is None:
            return self._memory[oid]
        return os.pread(self.spill[0], length, len(MAGIC) + at)

    def located(self, start: int) -> dict[str, tuple[int, int]]:
        """Each object's (file offset, length) once the segment begins at ``start``."""
        return {oid: (start + at, length) for oid, (at, length) in self.entries.items()}

    def segment(self) -> bytes:
        """The whole segment, for a batch kept in memory."""
        body = b"".join(self._memory.values())
        return body + _tail(self._size, self._crc, self.entries, self.notes)

    def finish_pack(self, packs: Path, *, durable: bool) -> str:
        """Write the batch as a pack of its own in ``packs``; returns the pack's name."""
        if self.spill is None:
            self._spill()
        assert self.spill is not None
        fd, path = self.spill
        write_all(fd, _tail(self._size, self._crc, self.entries, self.notes))
        if durable:
            os.fsync(fd)
        name = f"{secrets.token_hex(8)}.pack"
        failpoints.hit("fs.write", "pack")
        os.rename(path, packs / name)
        if durable:
            fsync_dir(packs)
        return name

    def close(self) -> None:
        if self.spill is not None:
            os.close(self.spill[0])
            self.spill[1].unlink(missing_ok=True)
            self.spill = None

    def _spill(self) -> None:
        path = self._tmp / f"{secrets.token_hex(8)}.pack"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444)
        self.spill = (fd, path)
        write_all(fd, MAGIC + b"".join(self._memory.values()))
        self._memory.clear()


def write_pack(
    tmp: Path, packs: Path, objects: list[tuple[str, bytes]], notes: list[bytes], *, durable: bool
) -> tuple[str, dict[str, tuple[int, int]]]:
    """A new pack of ``objects`` (id, compressed bytes) and ``notes``, written whole;
    returns its name and each object's (file offset, length)."""
    batch = PendingBatch(tmp)
    try:
        for oid, packed in objects:
            batch.add(oid, packed)
        batch.notes.extend(notes)
        return batch.finish_pack(packs, durable=durable), batch.located(len(MAGIC))
    finally:
        batch.close()


class Journal:
    """One store object's append-only pack file, ``packs/<name>.log``.

    Durability with one flush per batch. What a checkpoint needs on the disk before its
    reference is handed out: its objects, its record, and a name leading to them. A new
    file needs two flushes for that (its content, then the folder that names it), and the
    record in a file of its own two more. Here the segment (objects and record together) is
    written at the end of a file that is already named on the disk, and ``fdatasync``
    returns once those bytes and the new file size (the metadata needed to read them back)
    are there; the folder entry is flushed once, with the first segment. ``syncfs`` would
    also be one call, but it waits for every dirty page of the whole filesystem, other
    programs' too. Fewer than one flush cannot survive a power cut. A crash during a write
    leaves at most a torn last segment, which readers skip (its batch was never
    acknowledged); the next store object writes a journal of its own.
    """

    def __init__(self, packs: Path) -> None:
        self.name = f"{secrets.token_hex(8)}.log"
        self._packs = packs
        self._fd = os.open(
            packs / self.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444
        )
        self.end = 0
        self._named = False

    def append(self, segment: bytes, *, durable: bool) -> int:
        """Write ``segment`` at the end; returns the file offset of its first byte."""
        data = segment if self.end else MAGIC + segment
        failpoints.hit("fs.write", "journal")
        try:
            view = memoryview(data)
            at = self.end
            while view:
                written = os.pwrite(self._fd, view, at)
                view, at = view[written:], at + written
            if durable:
                _fdatasync(self._fd)
                if not self._named:
                    fsync_dir(self._packs)
                    self._named = True
        except BaseException:
            os.ftruncate(self._fd, self.end)  # no half segment for the next one to follow
            raise
        start = self.end + len(data) - len(segment)
        self.end += len(data)
        return start

    def close(self) -> None:
        os.close(self._fd)
