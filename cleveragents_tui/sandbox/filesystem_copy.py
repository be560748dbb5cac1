"""The filesystem_copy sandbox: a private copy of a directory, checkpointed incrementally.

Layout of the ``root`` folder given to ``create`` (the sandbox owns it)::

    sandbox.json        plan, strategy, resource, real location, and the *origin*: the tree of
                        the real directory when the sandbox was made (or last applied)
    work/               the copy tools work in (``workdir``)
    objects/            blobs and trees (:mod:`.objectstore`), and the checkpoint records: a
                        note ``{"checkpoint": <ref>, "root": <tree id>, "stamp": <fs time of
                        its scan>}`` stored with the checkpoint's objects, in the same write
                        and the same flush; ``{"drop": <ref>}`` when it is dropped
    index               the tree last seen in ``work/`` with its lstat details (when newer
                        than the last checkpoint): the cache that lets a checkpoint skip
                        unchanged files without reading them

A checkpoint walks ``work/`` with ``scandir`` + ``lstat`` and reads only the files whose
(size, mtime, mode, inode, ctime) differ from the index; unchanged directories keep their
tree ids, so a checkpoint stores only the changed files and the trees above them. A
rollback walks ``work/`` once against the target tree, plans every change, checks every
object it needs, then makes only those changes. The top-level ``.git`` (if any) is not
part of the sandbox: it is neither copied, checkpointed, restored nor applied.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    ApplyResult,
    Change,
    CheckpointMissingError,
    SandboxError,
)
from cleveragents_tui.sandbox.changes import Item, apply_items, changes_of, holds_new
from cleveragents_tui.sandbox.home import META, Identity, resource_directory
from cleveragents_tui.sandbox.objectstore.files import (
    DIR_FLAGS,
    fs_now,
    hash_fd,
    json_int,
    open_regular,
    read_json_object,
    write_json,
)
from cleveragents_tui.sandbox.objectstore.names import (
    MAX_DEPTH,
    check_link_target,
    check_name,
    check_oid,
    check_ref,
    join_path,
    new_ref,
    ref_seq,
)
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.objectstore.tree_writer import (
    TreeWriter,
    hash_path,
    list_path,
    lstat_path,
    readlink_path,
    remove_tree,
)
from cleveragents_tui.sandbox.objectstore.trees import (
    DIRECTORY,
    FILE,
    LINK_MODE,
    SYMLINK,
    Entry,
    Trees,
    is_clean,
)
from cleveragents_tui.sandbox.safety import UnsafeInputError

_STRATEGY = SandboxStrategyName.FILESYSTEM_COPY
_GIT = ".git"


class FilesystemCopyStrategy:
    """Makes :class:`FilesystemCopySandbox` es.

    ``durable`` (default) flushes every checkpoint to the disk before its reference is
    returned, so a reference stored in the database survives a power cut.
    """

    name = _STRATEGY

    def __init__(self, *, durable: bool = True) -> None:
        self._durable = durable

    def create(self, resource: Resource, plan_id: str, root: Path) -> FilesystemCopySandbox:
        """A new sandbox in ``root``, which must be new or empty: the sandbox owns it."""
        _check_strategy(resource)
        real = resource_directory(resource)
        identity = Identity.of(_STRATEGY, resource, plan_id, real)
        identity.claim(root)
        sandbox = FilesystemCopySandbox(resource, identity, root, real, durable=self._durable)
        try:
            sandbox.initialise()
        except BaseException:
            remove_tree(root)
            raise
        return sandbox

    def open(self, resource: Resource, plan_id: str, root: Path) -> FilesystemCopySandbox:
        _check_strategy(resource)
        real = resource_directory(resource)
        identity = Identity.of(_STRATEGY, resource, plan_id, real)
        meta = identity.check(root)
        sandbox = FilesystemCopySandbox(resource, identity, root, real, durable=self._durable)
        sandbox.load(meta)
        return sandbox


def _check_strategy(resource: Resource) -> None:
    if resource.sandbox_strategy != _STRATEGY:
        raise SandboxError(
            f"resource {resource.resource_id} uses strategy {resource.sandbox_strategy}",
            "use the strategy the resource names",
        )


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return FILE
    if stat.S_ISDIR(mode):
        return DIRECTORY
    if stat.S_ISLNK(mode):
        return SYMLINK
    return "special"


@dataclass
class _Plan:
    """What a rollback will do, worked out before anything is touched."""

    target_stamp: int
    index_stamp: int
    ops: list[tuple[str, str, Entry | None]] = field(default_factory=list)
    needed: dict[str, int] = field(default_factory=dict)
    kept: dict[str, os.stat_result] = field(default_factory=dict)


@dataclass(frozen=True)
class _Snapshot:
    """A tree id and the filesystem time its scan started (for the racy-ctime rule)."""

    root: str
    stamp: int

    def to_json(self) -> dict[str, object]:
        return {"v": 1, "root": self.root, "stamp": self.stamp}

    @staticmethod
    def from_json(doc: dict[str, object]) -> _Snapshot:
        return _Snapshot(check_oid(doc.get("root")), json_int(doc.get("stamp"), "stamp"))


class FilesystemCopySandbox:
    """One directory resource's private copy for one plan (see the module docstring)."""

    def __init__(
        self, resource: Resource, identity: Identity, home: Path, real: Path, *, durable: bool
    ) -> None:
        self._resource = resource
        self._identity = identity
        self._home = home
        self._real = real
        self._durable = durable
        self._work = home / "work"
        self._stamp_file = home / "stamp"
        self._store = ObjectStore(home / "objects", durable=durable)
        self._trees = Trees(self._store)
        self._origin = _Snapshot("", 0)
        self._index: _Snapshot | None = None
        self._records: dict[str, _Snapshot] = {}
        self._next_seq = 1
        self._discarded = False

    # --- lifecycle (called by the strategy) ------------------------------------------------

    def initialise(self) -> None:
        """Copy the real directory in: scan it into objects, then restore them into work/."""
        self._work.mkdir()
        self._store.create()
        self._origin = self._scan(self._real, None)
        self._index = self._restore(self._origin)
        self._save_meta()

    def load(self, meta: dict[str, object]) -> None:
        origin = meta.get("origin")
        self._origin = _Snapshot.from_json(origin if isinstance(origin, dict) else {})
        self._read_records()
        self._index = self._load_index()

    # --- the Sandbox protocol --------------------------------------------------------------

    @property
    def resource(self) -> Resource:
        return self._resource

    @property
    def workdir(self) -> Path:
        return self._work

    def checkpoint(self) -> str:
        self._alive()
        ref = new_ref(self._next_seq)
        with self._store.batch():  # the record is stored, and flushed, with the objects
            snapshot = self._scan(self._work, self._index)
            self._store.add_note(_note(checkpoint=ref, root=snapshot.root, stamp=snapshot.stamp))
        self._index = snapshot  # the checkpoint is the index now (see _load_index)
        self._records[ref] = snapshot
        self._next_seq += 1
        return ref

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
        self._index = self._restore(self._root_of(ref))

    def diff(self, old_ref: str, new_ref: str) -> list[Change]:
        self._alive()
        old, new = self._root_of(old_ref).root, self._root_of(new_ref).root
        return list(changes_of(self._items(old, new)))

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
        return list(changes_of(self._items(self._origin.root, self._snapshot().root)))

    def drop_checkpoint(self, ref: str) -> None:
        self._alive()
        self._root_of(ref)
        with self._store.batch():
            self._store.add_note(_note(drop=ref))
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
        items = self._items(self._origin.root, snapshot.root)
        if not items:
            return ApplyResult(f"nothing to apply to {self._real}", ())
        self._check_real(items)
        for item in items:
            if item.new is not None and item.new.kind == FILE:
                self._store.check(item.new.ref)
        apply_items(self._real, items, self._store, durable=self._durable)
        # The real folder now holds this snapshot at every path the sandbox manages. Not a
        # rescan of it: that would take in (or trip over) what others put elsewhere in it.
        self._origin = snapshot
        self._save_meta()
        changes = changes_of(items)
        return ApplyResult(f"{len(changes)} change(s) copied to {self._real}", changes)

    def discard(self) -> None:
        """Remove the sandbox's folder and everything in it (again: nothing to do)."""
        if self._discarded:
            return
        remove_tree(self._home)
        self._discarded = True

    # --- extras ----------------------------------------------------------------------------

    @property
    def home(self) -> Path:
        """The folder holding everything this sandbox stores (the ``root`` it was made in)."""
        return self._home

    def checkpoints(self) -> list[str]:
        """The references of the checkpoints kept, oldest first."""
        return sorted(self._records)

    # --- scanning --------------------------------------------------------------------------

    def _snapshot(self) -> _Snapshot:
        """Scan work/ into objects and make the result the new index."""
        snapshot = self._scan(self._work, self._index)
        self._index = snapshot
        write_json(self._home / "index", snapshot.to_json(), durable=False)
        return snapshot

    def _scan(self, directory: Path, cache: _Snapshot | None) -> _Snapshot:
        stamp = fs_now(self._stamp_file)
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with self._store.batch():
                root = self._scan_dir(
                    fd, "", cache.root if cache else None, cache.stamp if cache else 0
                )
        finally:
            os.close(fd)
        return _Snapshot(root, stamp)

    def _scan_dir(self, fd: int, rel: str, cached: str | None, stamp: int) -> str:
        if rel.count("/") >= MAX_DEPTH:
            raise SandboxError(
                f"{rel!r} is nested too deeply", f"keep trees under {MAX_DEPTH} levels"
            )
        before = self._cache_tree(cached, top=not rel)
        tree: dict[str, Entry] = {}
        same = cached is not None
        with os.scandir(fd) as items:
            for item in items:
                name = item.name
                if not rel and name == _GIT:
                    continue
                st = item.stat(follow_symlinks=False)
                old = before.get(name)
                if old is not None and is_clean(old, st, stamp):
                    tree[name] = old
                    continue
                entry = self._scan_entry(fd, rel, name, st, old, stamp)
                tree[name] = entry
                same = same and entry == old
        if same and len(tree) == len(before) and cached is not None:
            return cached
        return self._trees.save(tree, top=not rel)

    def _cache_tree(self, oid: str | None, *, top: bool) -> dict[str, Entry]:
        """A tree of the stat cache; a missing or damaged one only means re-reading files."""
        if oid is None:
            return {}
        try:
            return self._trees.load(oid, top=top)
        except (CheckpointMissingError, UnsafeInputError):
            return {}

    def _scan_entry(
        self, fd: int, rel: str, name: str, st: os.stat_result, old: Entry | None, stamp: int
    ) -> Entry:
        path = join_path(rel, name)
        try:
            if old is None:
                check_name(name, top=not rel)
            kind = _kind(st.st_mode)
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
                    oid = self._scan_dir(sub, path, inner, stamp)
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

    def _restore(self, target: _Snapshot) -> _Snapshot:
        """Make work/ equal to tree ``target``; returns the new index."""
        index = self._index
        plan = _Plan(target.stamp, index.stamp if index else 0)
        fd = os.open(self._work, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            self._plan_dir(fd, "", target.root, index.root if index else None, plan)
        finally:
            os.close(fd)
        for oid, size in plan.needed.items():
            self._store.check(oid, size)
        seen = dict(plan.kept)
        with TreeWriter(self._work, durable=False) as writer:
            for action, path, entry in plan.ops:
                if entry is None:
                    writer.remove(path)
                elif action == "write":
                    seen[path] = writer.write_object(
                        path, self._store, entry, mtime_ns=entry.mtime_ns, in_place=True
                    )
                elif action == "mode":
                    writer.set_mode(path, entry.mode)
                    seen[path] = _required(writer.lstat(path), path)
                elif action == "mtime":
                    seen[path] = writer.set_mtime(path, entry.mtime_ns)
                elif action == "symlink":
                    writer.symlink(path, entry.ref)
                elif action == "mkdir":
                    writer.make_dir(path)
                else:
                    writer.set_mode(path, entry.mode)
        # Nothing else writes work/ during a rollback, so every file is as planned or
        # written now: the stamp taken after the writes makes them trusted by the next scan.
        stamp = fs_now(self._stamp_file)
        with self._store.batch(durable=False):  # only the index needs them: a cache
            root = self._with_stats(target.root, "", seen, _dirs_of(seen))
        snapshot = _Snapshot(root, stamp)
        write_json(self._home / "index", snapshot.to_json(), durable=False)
        return snapshot

    def _plan_dir(self, fd: int, rel: str, target: str, cached: str | None, plan: _Plan) -> None:
        if rel.count("/") >= MAX_DEPTH:
            raise SandboxError(
                f"{rel!r} is nested too deeply", f"keep trees under {MAX_DEPTH} levels"
            )
        want = self._trees.load(target, top=not rel)
        # The index (lstat cache) only when already in memory: after a restart, hashing the
        # few files that differ from the target costs less than parsing every cached tree.
        known = self._trees.peek(cached, top=not rel) if cached else None
        current: dict[str, os.stat_result] = {}
        with os.scandir(fd) as items:
            for item in items:
                if rel or item.name != _GIT:
                    current[item.name] = item.stat(follow_symlinks=False)
        for name, st in list(current.items()):
            entry = want.get(name)
            if entry is None or entry.kind != _kind(st.st_mode):
                plan.ops.append(("remove", join_path(rel, name), None))
                del current[name]
        for name, entry in want.items():
            path = join_path(rel, name)
            st_now = current.get(name)
            if entry.kind == FILE:
                self._plan_file(fd, name, path, entry, st_now, known, plan)
            elif entry.kind == SYMLINK:
                check_link_target(path, entry.ref)
                if st_now is None or os.readlink(name, dir_fd=fd) != entry.ref:
                    plan.ops.append(("symlink", path, entry))
            elif st_now is None:
                plan.ops.append(("mkdir", path, entry))
                self._plan_new(path, entry.ref, plan)
                plan.ops.append(("dirmode", path, entry))
            else:
                sub = os.open(name, DIR_FLAGS, dir_fd=fd)
                try:
                    inner = known.get(name) if known else None
                    inner_ref = inner.ref if inner is not None and inner.kind == DIRECTORY else None
                    self._plan_dir(sub, path, entry.ref, inner_ref, plan)
                finally:
                    os.close(sub)
                if stat.S_IMODE(st_now.st_mode) != entry.mode:
                    plan.ops.append(("dirmode", path, entry))

    def _plan_file(
        self,
        fd: int,
        name: str,
        path: str,
        entry: Entry,
        st: os.stat_result | None,
        known: dict[str, Entry] | None,
        plan: _Plan,
    ) -> None:
        if st is not None:
            if is_clean(entry, st, plan.target_stamp):
                return  # not touched since the checkpoint recorded it
            cached = known.get(name) if known else None
            if cached is not None and is_clean(cached, st, plan.index_stamp):
                current: str | None = cached.ref
            elif st.st_size != entry.size:
                current = None
            else:
                file_fd = open_regular(fd, name)
                try:
                    current = hash_fd(file_fd)
                finally:
                    os.close(file_fd)
            if current == entry.ref:
                if stat.S_IMODE(st.st_mode) != entry.mode:
                    plan.ops.append(("mode", path, entry))
                if st.st_mtime_ns != entry.mtime_ns:
                    plan.ops.append(("mtime", path, entry))
                if (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns) != entry[2:6]:
                    plan.kept[path] = st
                return
        plan.ops.append(("write", path, entry))
        plan.needed[entry.ref] = entry.size

    def _plan_new(self, rel: str, target: str, plan: _Plan) -> None:
        if rel.count("/") >= MAX_DEPTH:
            raise SandboxError(
                f"{rel!r} is nested too deeply", f"keep trees under {MAX_DEPTH} levels"
            )
        for name, entry in self._trees.load(target).items():
            path = join_path(rel, name)
            if entry.kind == FILE:
                plan.ops.append(("write", path, entry))
                plan.needed[entry.ref] = entry.size
            elif entry.kind == SYMLINK:
                check_link_target(path, entry.ref)
                plan.ops.append(("symlink", path, entry))
            else:
                plan.ops.append(("mkdir", path, entry))
                self._plan_new(path, entry.ref, plan)
                plan.ops.append(("dirmode", path, entry))

    def _with_stats(
        self, tree_id: str, rel: str, seen: dict[str, os.stat_result], dirs: set[str]
    ) -> str:
        """``tree_id`` with the lstat details of the files in ``seen`` (for the index)."""
        if rel not in dirs:
            return tree_id
        tree = dict(self._trees.load(tree_id, top=not rel))
        changed = False
        for name, entry in tree.items():
            path = join_path(rel, name)
            if entry.kind == DIRECTORY:
                inner = self._with_stats(entry.ref, path, seen, dirs)
                updated = entry._replace(ref=inner)
            elif entry.kind == FILE and path in seen:
                st = seen[path]
                updated = entry._replace(
                    size=st.st_size, mtime_ns=st.st_mtime_ns, ino=st.st_ino, ctime_ns=st.st_ctime_ns
                )
            else:
                continue
            if updated != entry:
                tree[name] = updated
                changed = True
        return self._trees.save(tree, top=not rel) if changed else tree_id

    # --- comparing -------------------------------------------------------------------------

    def _items(self, old: str, new: str) -> list[Item]:
        out: list[Item] = []
        self._compare(old, new, "", out)
        return sorted(out, key=lambda item: item.path)

    def _compare(self, old: str | None, new: str | None, rel: str, out: list[Item]) -> None:
        if old == new:
            return
        before = self._trees.load(old, top=not rel) if old else {}
        after = self._trees.load(new, top=not rel) if new else {}
        for name in before.keys() | after.keys():
            was, now = before.get(name), after.get(name)
            path = join_path(rel, name)
            if was is not None and now is not None and was.kind == now.kind == DIRECTORY:
                if was.mode != now.mode:
                    out.append(Item(path, was, now))
                self._compare(was.ref, now.ref, path, out)
                continue
            if was is not None and now is not None and was.same_content(now):
                continue
            out.append(Item(path, was, now))
            if was is not None and was.kind == DIRECTORY:
                self._compare(was.ref, None, path, out)
            if now is not None and now.kind == DIRECTORY:
                self._compare(None, now.ref, path, out)

    def _check_real(self, items: list[Item]) -> None:
        """Refuse to apply over paths someone else changed in the real directory."""
        deleted = {item.path for item in items if item.new is None}
        conflicts = [
            item.path
            for item in items
            if not (self._real_matches(item, deleted) or holds_new(self._real, item))
        ]
        if conflicts:
            shown = ", ".join(conflicts[:5]) + (" ..." if len(conflicts) > 5 else "")
            raise SandboxError(
                f"{len(conflicts)} path(s) changed in {self._real} since the sandbox was made: "
                f"{shown}",
                "nothing was applied; reconcile them (or discard the sandbox) and retry",
            )

    def _real_matches(self, item: Item, deleted: set[str]) -> bool:
        st = lstat_path(self._real, item.path)
        old = item.old
        if old is None or st is None:
            return st is None and (old is None or item.new is None)
        if _kind(st.st_mode) != old.kind:
            return False
        if old.kind == FILE:
            return is_clean(old, st, self._origin.stamp) or (
                stat.S_IMODE(st.st_mode) == old.mode and hash_path(self._real, item.path) == old.ref
            )
        if old.kind == SYMLINK:
            return readlink_path(self._real, item.path) == old.ref
        if item.new is None or item.new.kind != DIRECTORY:  # it goes: nothing foreign inside
            names = list_path(self._real, item.path)
            return all(join_path(item.path, name) in deleted for name in names)
        return True

    # --- storage ---------------------------------------------------------------------------

    def _root_of(self, ref: str) -> _Snapshot:
        snapshot = self._records.get(check_ref(ref))
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
        made: dict[str, _Snapshot] = {}
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

    def _load_index(self) -> _Snapshot | None:
        """The latest snapshot of work/: the index file or the newest checkpoint.

        A checkpoint does not rewrite the index file, so whichever scan started last
        describes work/ best. A stale or missing index only means re-reading files.
        """
        found: list[_Snapshot] = []
        with contextlib.suppress(CheckpointMissingError, UnsafeInputError):
            found.append(_Snapshot.from_json(read_json_object(self._home / "index")))
        if self._records:
            found.append(self._records[max(self._records)])
        usable = []
        for snapshot in found:
            try:
                self._trees.load(snapshot.root, top=True)
            except (CheckpointMissingError, UnsafeInputError):
                continue
            usable.append(snapshot)
        return max(usable, key=lambda snapshot: snapshot.stamp, default=None)

    def _save_meta(self) -> None:
        meta = self._identity.meta(origin=self._origin.to_json())
        write_json(self._home / META, meta, durable=self._durable)

    def _collect_garbage(self) -> None:
        """Delete objects no checkpoint, index or origin needs (skipped if any is unreadable)."""
        keep: set[str] = set()
        try:
            roots = [self._origin.root] + [snapshot.root for snapshot in self._records.values()]
            if self._index is not None:
                roots.append(self._index.root)
            for root in roots:
                self._trees.reachable(root, keep)
        except (CheckpointMissingError, UnsafeInputError):
            return
        self._store.sweep(keep, self._keep_note)

    def _alive(self) -> None:
        if self._discarded:
            raise SandboxError(
                f"the sandbox of {self._resource.resource_id} was discarded", "create a new one"
            )


def _note(**fields: object) -> bytes:
    return json.dumps({"v": 1, **fields}, sort_keys=True).encode()


def _read_note(note: bytes) -> tuple[str, _Snapshot | None] | None:
    """(ref, its snapshot) of a checkpoint note, (ref, None) of a drop note, None otherwise."""
    try:
        doc = json.loads(note)
        if not isinstance(doc, dict) or doc.get("v") != 1:
            return None
        if "drop" in doc:
            return check_ref(str(doc["drop"])), None
        return check_ref(str(doc.get("checkpoint"))), _Snapshot.from_json(doc)
    except (ValueError, CheckpointMissingError, UnsafeInputError):
        return None


def _required(st: os.stat_result | None, path: str) -> os.stat_result:
    if st is None:
        raise SandboxError(f"{path!r} vanished while it was being restored", "roll back again")
    return st


def _dirs_of(paths: dict[str, os.stat_result]) -> set[str]:
    """Every directory that holds one of ``paths``, the root ``''`` included."""
    dirs = {""}
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            dirs.add("/".join(parts[:depth]))
    return dirs
