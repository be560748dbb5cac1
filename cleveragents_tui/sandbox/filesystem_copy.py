"""The filesystem_copy sandbox: a private copy of a directory, checkpointed incrementally.

Layout of the ``root`` folder given to ``create`` (the sandbox owns it)::

    sandbox.json        plan, strategy, resource, real location, and the *origin*: the tree of
                        the real directory when the sandbox was made (or last applied)
    work/               the copy tools work in (``workdir``)
    objects/            blobs and trees (:mod:`.objectstore`; trees in the compact format 2,
                        changed folders as deltas), and the checkpoint records: a note
                        ``{"checkpoint": <ref>, "root": <tree id>, "stamp": <fs time of its
                        scan>}`` stored with the checkpoint's objects, in the same write and
                        the same flush; ``{"drop": <ref>}`` when it is dropped
    index               the stat cache (:mod:`.filesystem_index`): the tree last seen in
                        ``work/`` and every file's lstat details, rewritten after each scan
                        and rollback, so a checkpoint skips unchanged files without reading
                        them; never stored in the trees, a checkpoint stores only content

A checkpoint walks ``work/`` with ``scandir`` + ``lstat`` and reads only the files whose
(size, mtime, mode, inode, ctime) differ from the index; unchanged directories keep their
tree ids, so a checkpoint stores only the changed files and, for each folder above them,
the entries that changed. A rollback (:mod:`.filesystem_restore`) walks ``work/`` once
against the target tree, plans every change, checks every object it needs, then makes only
those changes; comparing trees, and checking the real directory before an apply, are in
:mod:`.filesystem_compare`. The top-level ``.git`` (if any) is not part of the sandbox: it
is neither copied, checkpointed, restored nor applied. Sandboxes made before format 2
(format-1 trees with lstat details inside, a JSON ``index``) open, roll back, checkpoint and
apply as they are.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.sandbox.base import ApplyResult, Change, CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.changes import apply_items, changed_outside, changes_of
from cleveragents_tui.sandbox.directory_sandbox import DirectorySandbox, DirectoryStrategy
from cleveragents_tui.sandbox.filesystem_compare import check_real, tree_items
from cleveragents_tui.sandbox.filesystem_index import Folder, Snapshot, StatIndex
from cleveragents_tui.sandbox.filesystem_pending import pending_changes, pending_conflicts
from cleveragents_tui.sandbox.filesystem_restore import (
    GIT,
    carry_out,
    check_depth,
    index_after,
    kind_of,
    plan_restore,
)
from cleveragents_tui.sandbox.home import META, Identity
from cleveragents_tui.sandbox.objectstore.files import DIR_FLAGS, fs_now, open_regular, write_json
from cleveragents_tui.sandbox.objectstore.names import (
    check_link_target,
    check_name,
    check_ref,
    join_path,
    new_ref,
    ref_seq,
)
from cleveragents_tui.sandbox.objectstore.objects import decode_note, encode_note
from cleveragents_tui.sandbox.objectstore.trees import (
    DIRECTORY,
    FILE,
    LINK_MODE,
    SYMLINK,
    Entry,
    Tree,
    Trees,
    content_of,
    is_clean,
)
from cleveragents_tui.sandbox.safety import UnsafeInputError

_STRATEGY = SandboxStrategyName.FILESYSTEM_COPY


@dataclass
class _Scan:
    """One scan's inputs and what it found: the stat cache it trusts, the folders seen."""

    old: StatIndex | None
    folders: dict[str, Folder] = field(default_factory=dict)

    @property
    def stamp(self) -> int:
        return self.old.snapshot.stamp if self.old is not None else 0


class FilesystemCopySandbox(DirectorySandbox):
    """One directory resource's private copy for one plan (see the module docstring)."""

    def __init__(
        self, resource: Resource, identity: Identity, home: Path, real: Path, *, durable: bool
    ) -> None:
        super().__init__(resource, identity, home, real, durable=durable)
        self._work = home / "work"
        self._stamp_file = home / "stamp"
        self._trees = Trees(self._store, compact=True)
        self._origin = Snapshot("", 0)
        self._index: StatIndex | None = None
        self._records: dict[str, Snapshot] = {}
        self._scratch: dict[str, Snapshot] = {}  # scratch_checkpoint's: never on the disk
        self._next_seq = 1

    # --- lifecycle (called by the strategy) ------------------------------------------------

    def initialise(self) -> None:
        """Copy the real directory in: scan it into objects, then restore them into work/."""
        self._work.mkdir()
        self._store.create()
        self._origin = self._scan(self._real, None).snapshot
        self._restore(self._origin)
        self._save_meta()

    def load(self, meta: dict[str, object]) -> None:
        origin = meta.get("origin")
        self._origin = Snapshot.from_json(origin if isinstance(origin, dict) else {})
        self._read_records()
        self._index = self._load_index()

    # --- the Sandbox protocol --------------------------------------------------------------

    @property
    def workdir(self) -> Path:
        return self._work

    def checkpoint(self) -> str:
        self._alive()
        ref = new_ref(self._next_seq)
        with self._store.batch():  # the record is stored, and flushed, with the objects
            index = self._scan(self._work, self._index)
            snapshot = index.snapshot
            self._store.add_note(
                encode_note(checkpoint=ref, root=snapshot.root, stamp=snapshot.stamp)
            )
        self._set_index(index)
        self._records[ref] = snapshot
        self._next_seq += 1
        return ref

    @contextmanager
    def scratch_checkpoint(self) -> Iterator[str]:
        """The state of work/ now, as a checkpoint to diff and read until the block ends,
        then gone: nothing is written to the object store (no objects, no record, no
        flush), so there is nothing to drop or collect after it. The stat cache stays as
        it was: it must name only trees the disk holds."""
        self._alive()
        ref = new_ref(self._next_seq)
        with self._store.scratch():
            self._scratch[ref] = self._scan(self._work, self._index).snapshot
            try:
                yield ref
            finally:
                del self._scratch[ref]

    def verify(self, ref: str) -> None:
        self._alive()
        self._trees.verify(self._root_of(ref).root)

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        """Make work/ equal to checkpoint ``ref``, touching only what differs.

        Everything is planned and every needed object checked before the first change, so
        a damaged or hostile checkpoint is refused with work/ as it was. A failure while
        writing (a full disk) leaves work/ partly restored; rolling back again finishes it.
        """
        self._alive()
        self._restore(self._root_of(ref))

    def diff(self, old_ref: str, new_ref: str) -> list[Change]:
        self._alive()
        old, new = self._root_of(old_ref).root, self._root_of(new_ref).root
        return list(changes_of(tree_items(self._trees, old, new)))

    def read(self, ref: str, path: str) -> bytes | None:
        """A file's bytes at ``ref``; a symlink's target; None for a directory or nothing."""
        self._alive()
        entry = self._trees.lookup(self._root_of(ref).root, path)
        if entry is None or entry.kind == DIRECTORY:
            return None
        if entry.kind == SYMLINK:
            return os.fsencode(entry.ref)
        return self._store.read_bytes(entry.ref, limit=entry.size)

    def changes_since_baseline(self) -> list[Change]:
        self._alive()
        return list(changes_of(tree_items(self._trees, self._origin.root, self._snapshot().root)))

    def pending_changes(self) -> list[Change]:
        """As ``changes_since_baseline``, without scanning work/ into objects (a dry run)."""
        self._alive()
        return pending_changes(self._trees, self._origin.root, self._work, self._index)

    def apply_refusal(self) -> SandboxError | None:
        """Apply's refusal over paths changed in the real directory, read only (a dry run)."""
        self._alive()
        origin, work, real = self._origin.root, self._work, self._real
        conflicts = pending_conflicts(self._trees, origin, work, self._index, real)
        return changed_outside(real, conflicts) if conflicts else None

    def drop_checkpoint(self, ref: str) -> None:
        self._alive()
        self._root_of(ref)
        with self._store.batch():
            self._store.add_note(encode_note(drop=ref))
        del self._records[ref]
        self._collect_garbage()

    def apply(self) -> ApplyResult:
        """Copy what changed in work/ since the origin to the real directory.

        Refused, with nothing written, when a path to be written or deleted changed in the
        real directory since the sandbox was made. Afterwards the origin is the snapshot
        just applied, so a second apply finds nothing to do, and what others changed
        elsewhere in the real directory is neither taken in nor undone by a later apply.
        """
        self._alive()
        snapshot = self._snapshot()
        items = tree_items(self._trees, self._origin.root, snapshot.root)
        if not items:
            return ApplyResult(f"nothing to apply to {self._real}", ())
        check_real(self._real, items)
        for item in items:
            if item.new is not None and item.new.kind == FILE:
                self._store.check(item.new.ref)
        apply_items(self._real, items, self._store, durable=self._durable)
        # The real folder now holds this snapshot at every path the sandbox manages. Not a
        # rescan of it: that would take in (or trip over) what others put elsewhere in it.
        self._origin = snapshot
        self._save_meta()
        changes = changes_of(items)
        return ApplyResult(f"{counted(len(changes), 'change')} copied to {self._real}", changes)

    # --- extras ----------------------------------------------------------------------------

    def checkpoints(self) -> list[str]:
        """The references of the checkpoints kept, oldest first."""
        return sorted(self._records)

    # --- scanning --------------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        """Scan work/ into objects and make the result the new index."""
        index = self._scan(self._work, self._index)
        self._set_index(index)
        return index.snapshot

    def _set_index(self, index: StatIndex) -> None:
        self._index = index
        with contextlib.suppress(OSError):  # a cache not written means reading files again
            index.save(self._home / "index")

    def _scan(self, directory: Path, old: StatIndex | None) -> StatIndex:
        stamp = fs_now(self._stamp_file)
        scan = _Scan(old)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with self._store.batch():
                root = self._scan_dir(fd, "", old.snapshot.root if old else None, scan)
        finally:
            os.close(fd)
        return StatIndex(Snapshot(root, stamp), scan.folders)

    def _scan_dir(self, fd: int, rel: str, cached: str | None, scan: _Scan) -> str:
        """The tree id of folder ``rel`` now; ``cached`` is its tree in the stat cache."""
        check_depth(rel)
        before = self._cache_tree(rel, cached, scan.old)
        tree: Tree = {}
        same = before is not None  # the same content as ``cached``
        same_stats = same
        before = before or {}
        stamp = scan.stamp
        with os.scandir(fd) as items:
            for item in items:
                name = item.name
                if not rel and name == GIT:
                    continue
                st = item.stat(follow_symlinks=False)
                old = before.get(name)
                if old is not None and is_clean(old, st, stamp):
                    tree[name] = old
                    continue
                entry = self._scan_entry(fd, rel, name, st, old, scan)
                tree[name] = entry
                if entry != old:
                    same_stats = False
                    same = same and old is not None and content_of(entry) == content_of(old)
        if same and cached is not None and len(tree) == len(before):
            folder = scan.old.folders.get(rel) if same_stats and scan.old else None
            keep = folder is not None and folder.tree == cached
            scan.folders[rel] = folder if folder is not None and keep else Folder(cached, tree)
            return cached
        oid = self._trees.save(tree, top=not rel, base=cached)
        scan.folders[rel] = Folder(oid, tree)
        return oid

    def _cache_tree(self, rel: str, oid: str | None, old: StatIndex | None) -> Tree | None:
        """Folder ``rel``'s entries with lstat details, from the stat cache, else from tree
        ``oid`` (a format-1 tree has them; format 2 not, so its files are read again). None
        when there is none: a missing or damaged one only means re-reading files."""
        if oid is None:
            return None
        listing = old.listing(rel, oid) if old is not None else None
        if listing is not None:
            return listing
        try:
            return self._trees.load(oid, top=not rel)
        except (CheckpointMissingError, UnsafeInputError):
            return None

    def _scan_entry(
        self, fd: int, rel: str, name: str, st: os.stat_result, old: Entry | None, scan: _Scan
    ) -> Entry:
        path = join_path(rel, name)
        try:
            if old is None:
                check_name(name, top=not rel)
            kind = kind_of(st.st_mode)
            mode = stat.S_IMODE(st.st_mode) & 0o777
            if kind == FILE:
                file_fd = open_regular(fd, name)
                try:
                    oid, size = self._store.put_fd(file_fd, st.st_size)
                finally:
                    os.close(file_fd)
                return Entry(FILE, mode, size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, oid)
            if kind == DIRECTORY:
                sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                try:
                    inner = old.ref if old is not None and old.kind == DIRECTORY else None
                    oid = self._scan_dir(sub, path, inner, scan)
                finally:
                    os.close(sub)
                return Entry(DIRECTORY, mode, 0, 0, 0, 0, oid)
            if kind == SYMLINK:
                target = check_link_target(path, os.readlink(name, dir_fd=fd))
                return Entry(SYMLINK, LINK_MODE, len(target), 0, 0, 0, target)
        except UnsafeInputError as exc:
            raise SandboxError(f"cannot record {path!r}: {exc}", "rename or remove it") from exc
        raise SandboxError(
            f"cannot record {path!r}: it is a device, FIFO or socket",
            "remove it; only files, directories and symlinks are kept",
        )

    # --- restoring -------------------------------------------------------------------------

    def _restore(self, target: Snapshot) -> None:
        """Make work/ equal to tree ``target``, and the stat cache say what it holds now."""
        plan = plan_restore(self._work, self._trees, target, self._index)
        for oid, size in plan.needed.items():
            self._store.check(oid, size)
        seen = carry_out(plan, self._work, self._store)
        # Nothing else writes work/ during a rollback, so every file is as planned or
        # written now: the stamp taken after the writes makes them trusted by the next scan.
        stamp = fs_now(self._stamp_file)
        index = index_after(self._trees, target.root, seen, self._index, stamp)
        self._set_index(index)

    # --- storage ---------------------------------------------------------------------------

    def _root_of(self, ref: str) -> Snapshot:
        snapshot = self._records.get(check_ref(ref)) or self._scratch.get(ref)
        if snapshot is None:  # made since this object read the records, by another process?
            self._store.refresh()
            self._read_records()
            snapshot = self._records.get(ref)
        if snapshot is None:
            raise CheckpointMissingError(
                f"checkpoint {ref} of {self._resource.resource_id} does not exist",
                "it was dropped or never made here; pick another checkpoint",
            )
        return snapshot

    def _read_records(self) -> None:
        """The checkpoints kept: every checkpoint note without a drop note."""
        made: dict[str, Snapshot] = {}
        dropped: set[str] = set()
        for note in self._store.notes():
            read = _read_note(note)
            if read is None:
                continue
            ref, snapshot = read
            self._next_seq = max(self._next_seq, ref_seq(ref) + 1)
            if snapshot is None:
                dropped.add(ref)
            else:
                made[ref] = snapshot
        self._records = {ref: made[ref] for ref in made.keys() - dropped}

    def _keep_note(self, note: bytes) -> bool:
        """What garbage collection keeps: drop notes, and the records of kept checkpoints."""
        read = _read_note(note)
        return read is None or read[1] is None or read[0] in self._records

    def _load_index(self) -> StatIndex | None:
        """The stat cache of work/: the index file, or the newest checkpoint if it is newer.

        The index file is rewritten after every scan, but not flushed: after a crash the
        newest checkpoint may be newer. A stale or missing cache only means re-reading files.
        """
        found: list[StatIndex] = []
        saved = StatIndex.read(self._home / "index")
        if saved is not None:
            found.append(saved)
        if self._records:
            found.append(StatIndex(self._records[max(self._records)]))
        usable = []
        for index in found:
            try:
                self._trees.load(index.snapshot.root, top=True)
            except (CheckpointMissingError, UnsafeInputError):
                continue
            usable.append(index)
        return max(usable, key=lambda index: index.snapshot.stamp, default=None)

    def _save_meta(self) -> None:
        meta = self._identity.meta(origin=self._origin.to_json())
        write_json(self._home / META, meta, durable=self._durable)

    def _collect_garbage(self) -> None:
        """Delete objects no checkpoint, index or origin needs (skipped if any is unreadable)."""
        roots = [self._origin.root] + [snapshot.root for snapshot in self._records.values()]
        if self._index is not None:
            roots.append(self._index.snapshot.root)
        try:
            keep = self._trees.reachable(roots)
        except (CheckpointMissingError, UnsafeInputError):
            return
        self._store.sweep(keep, self._keep_note)


class FilesystemCopyStrategy(DirectoryStrategy[FilesystemCopySandbox]):
    """Makes :class:`FilesystemCopySandbox` es (``durable``: flush each checkpoint)."""

    name = _STRATEGY
    sandbox_type = FilesystemCopySandbox


def _read_note(note: bytes) -> tuple[str, Snapshot | None] | None:
    """(ref, its snapshot) of a checkpoint note, (ref, None) of a drop note, None otherwise."""
    doc = decode_note(note)
    if doc is None:
        return None
    try:
        if "drop" in doc:
            return check_ref(str(doc["drop"])), None
        return check_ref(str(doc.get("checkpoint"))), Snapshot.from_json(doc)
    except (ValueError, CheckpointMissingError, UnsafeInputError):
        return None
