"""The stored records of what git does not keep: written beside a checkpoint, read back,
verified and dropped.

Each record is an object of the sandbox's own object store, named by a note per checkpoint
(see :mod:`.blind_spots` for the layout); taking a record is :mod:`.blind_spot_scan`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.git.records import Record, keeps, read_note
from cleveragents_tui.sandbox.objectstore.names import check_entry_path
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore, encode_note
from cleveragents_tui.sandbox.objectstore.tree_writer import remove_tree
from cleveragents_tui.sandbox.objectstore.trees import DIRECTORY, FILE, Entry, Trees
from cleveragents_tui.sandbox.safety import UnsafeInputError


class StoredSpots:
    """The records of one git_worktree sandbox, in ``home``; ``workdir`` is its worktree."""

    def __init__(self, home: Path, workdir: Path) -> None:
        self.home = home
        self._workdir = workdir
        self._store = ObjectStore(home / "objects", durable=False)
        self._trees = Trees(self._store)
        self._records: dict[str, Record] = {}
        self._oids: dict[str, str] = {}  # checkpoint -> its record's object, once known
        self._latest: Record | None = None  # the stat cache of the next scan
        self._checked: set[str] = set()  # names already found acceptable

    # ---------------------------------------------------------------------- storing

    def record(self, sha: str, record: Record) -> None:
        """Store ``record`` as checkpoint ``sha``'s, with its note, in one append."""
        with self._store.batch(durable=False):
            oid = self._store.put_bytes(record.encode())
            self._store.add_note(encode_note(checkpoint=sha, record=oid))
        kept = replace(record, files=None)  # every file's bits: only a rollback needs them
        self._records[sha], self._oids[sha] = kept, oid
        self._latest = kept

    def record_same(self, sha: str, earlier: str) -> None:
        """Store checkpoint ``sha``'s record as the one of checkpoint ``earlier`` (the same
        state): only a note naming the stored record, nothing encoded or hashed again."""
        record = self.load(earlier)
        oid = self._oids[earlier]
        with self._store.batch(durable=False):
            self._store.add_note(encode_note(checkpoint=sha, record=oid))
        self._records[sha], self._oids[sha] = record, oid
        self._latest = record

    def check(self, path: str) -> str:
        """``path``, when a record can hold it; SandboxError naming it otherwise."""
        return self._check(path)

    def _check(self, path: str) -> str:
        if path not in self._checked:
            try:
                check_entry_path(path)
            except UnsafeInputError as exc:
                raise SandboxError(
                    f"cannot keep {path!r} beside the checkpoint ({exc})",
                    "rename it (no backslash, no '~' at the start)",
                ) from None
            self._checked.add(path)
        return path

    # ---------------------------------------------------------------------- reading back

    def load(self, sha: str) -> Record:
        """Checkpoint ``sha``'s record; CheckpointMissingError if it is gone or damaged."""
        found = self._records.get(sha)
        if found is not None:
            return found
        oid = self._note_of(sha)
        if oid is None:
            self._store.refresh()  # another process may have added it since
            oid = self._note_of(sha)
        if oid is None:
            raise CheckpointMissingError(
                f"checkpoint {sha[:12]} has no record of its ignored files, empty folders "
                "and permissions",
                "roll back to another decision, or correct the plan with --mode=append",
            )
        try:
            record = Record.decode(self._store.read_bytes(oid))
        except UnsafeInputError as exc:
            raise CheckpointMissingError(str(exc), "roll back to another decision") from exc
        self._records[sha], self._oids[sha] = record, oid
        return record

    def verify(self, sha: str) -> None:
        """The record of ``sha`` and every object it names are there and intact."""
        self._records.pop(sha, None)
        record = self.load(sha)
        for entry in record.ignored.values():
            self._verify_entry(entry)

    def _verify_entry(self, entry: Entry) -> None:
        if entry.kind == FILE:
            self._store.check(entry.ref, entry.size)
        elif entry.kind == DIRECTORY:
            self._store.check(entry.ref)
            for inner in self._trees.load(entry.ref).values():
                self._verify_entry(inner)

    def _note_of(self, sha: str) -> str | None:
        found = None
        for raw in self._store.notes():
            note = read_note(raw)
            if note is not None and note[0] == sha:
                found = note[1]
        return found

    def drop(self, sha: str) -> None:
        """Forget checkpoint ``sha``'s record and delete what no other record needs."""
        with self._store.batch(durable=False):
            self._store.add_note(encode_note(drop=sha))
        self._records.pop(sha, None)
        self._oids.pop(sha, None)
        live: dict[str, str] = {}
        for raw in self._store.notes():
            note = read_note(raw)
            if note is not None:
                if note[1] is None:
                    live.pop(note[0], None)
                else:
                    live[note[0]] = note[1]
        keep = set(live.values())
        try:
            for sha, oid in live.items():
                record = self._records.get(sha) or Record.decode(self._store.read_bytes(oid))
                for entry in record.ignored.values():
                    self._reachable(entry, keep)
        except (CheckpointMissingError, UnsafeInputError):
            return  # an unreadable record: keep everything
        self._store.sweep(keep, lambda raw: keeps(raw, live))

    def _reachable(self, entry: Entry, into: set[str]) -> None:
        if entry.kind == FILE:
            into.add(entry.ref)
        elif entry.kind == DIRECTORY and entry.ref not in into:
            into.add(entry.ref)
            for inner in self._trees.load(entry.ref).values():
                self._reachable(inner, into)

    def discard(self) -> None:
        remove_tree(self.home)
