# Over 500 lines: BlindSpots takes, stores and restores one record kind; splitting take from restore would split one format.
"""What git does not keep of a git_worktree sandbox, kept beside each of its checkpoints.

A :class:`.records.Record` holds what git does not keep of one state (see
:mod:`.records`); this module takes, stores and restores them.

Layout of the folder (``<root>/blind-spots``, beside the worktree)::

    objects/   the object store: records, ignored files' blobs and folder trees, and a
               note per checkpoint, ``{"checkpoint": <sha>, "record": <id>}`` (or
               ``{"drop": <sha>}``), stored with the record's objects in one append
    stamp      touched at each scan: the filesystem clock of the racy-ctime rule

Taking a record costs one ``lstat`` of every file and folder (no file is read unless it is
ignored and changed), beside the ``git status`` a checkpoint runs anyway. Restoring one
after git has put the tracked files back changes only what differs from the state the
rollback starts from (see :meth:`BlindSpots.restore`). Objects are not flushed to the disk,
as git does not flush the loose objects of its checkpoints either.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import replace
from pathlib import Path

from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.git.records import (
    Record,
    Walk,
    keeps,
    leave_out,
    listing_of,
    read_note,
    remove_quietly,
    umask_now,
    usual_mode,
)
from cleveragents_tui.sandbox.objectstore.files import READ_FLAGS, fs_now
from cleveragents_tui.sandbox.objectstore.names import (
    check_entry_path,
    check_name,
    join_path,
)
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore, encode_note
from cleveragents_tui.sandbox.objectstore.tree_writer import TreeWriter, remove_tree
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

DIRNAME = "blind-spots"
# What git lists as ignored: wholly ignored folders once (``build/``), empty ones included.
LIST_IGNORED = ("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")
_PLAIN = 0o644


class BlindSpots:
    """The records of one git_worktree sandbox, in ``home``; ``workdir`` is its worktree.

    One object per sandbox object, used from one thread at a time; records are cached in
    memory once read or made.
    """

    def __init__(self, home: Path, workdir: Path) -> None:
        self.home = home
        self._workdir = workdir
        self._store = ObjectStore(home / "objects", durable=False)
        self._trees = Trees(self._store)
        self._records: dict[str, Record] = {}
        self._oids: dict[str, str] = {}  # checkpoint -> its record's object, once known
        self._latest: Record | None = None  # the stat cache of the next scan
        self._checked: set[str] = set()  # names already found acceptable

    @classmethod
    def create(cls, home: Path, workdir: Path) -> BlindSpots:
        home.mkdir(parents=True, exist_ok=True)
        spots = cls(home, workdir)
        spots._store.create()
        return spots

    @classmethod
    def open(cls, home: Path, workdir: Path) -> BlindSpots | None:
        """The records in ``home``; None for a sandbox made before they were kept."""
        return cls(home, workdir) if (home / "objects").is_dir() else None

    # ---------------------------------------------------------------------- recording

    def scan(self, listing: bytes, usual: Record | None, walked: Walk | None = None) -> Record:
        """The worktree's present state; ``listing`` is the output of :data:`LIST_IGNORED`.

        ``usual`` is the record whose usual bits this one takes (the baseline's: what git
        gave the files it checked out); None takes the most common bits found. ``walked``
        is what :meth:`walk` found of the same state, if it ran while git listed.
        """
        stamp, dirs, files = walked if walked is not None else self.walk()
        ignored_paths = {os.fsdecode(path.rstrip(b"/")) for path in listing.split(b"\0") if path}
        skipped = self._skipped()
        for path in sorted(skipped - ignored_paths):  # ignored no more: walked now
            self._walk_path(path, dirs, files)
        if ignored_paths - skipped:
            leave_out(ignored_paths, dirs, files)
        if usual is not None:
            file_mode, exec_mode = usual.file_mode, usual.exec_mode
        else:
            plain = Counter(mode for mode in files.values() if not mode & stat.S_IXUSR)
            executable = Counter(mode for mode in files.values() if mode & stat.S_IXUSR)
            file_mode = usual_mode(plain, _PLAIN)
            # With no executable file to go by: what the same umask gives one.
            exec_mode = usual_mode(executable, file_mode | (file_mode & 0o444) >> 2)
        modes = {
            path: mode
            for path, mode in files.items()
            if mode != (exec_mode if mode & stat.S_IXUSR else file_mode)
        }
        for path in modes:
            self._check(path)
        cache = self._latest
        with self._store.batch(durable=False):
            ignored = {}
            for path in sorted(ignored_paths):
                old = cache.ignored.get(path) if cache is not None else None
                full = os.path.join(self._workdir, self._check(path))
                entry = self._capture(full, old, cache.stamp if cache else 0)
                if entry is not None:
                    ignored[path] = entry
        return Record(stamp, file_mode, exec_mode, dirs, modes, ignored, files)

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

    def walk(self) -> Walk:
        """Every folder and file of the worktree with its bits, for :meth:`scan`; run while
        git lists what is ignored (``git status`` and :data:`LIST_IGNORED` run meanwhile,
        in processes of their own). The paths the last record found ignored are not
        entered; the scan sorts out what was ignored, or stopped being so, since."""
        stamp = fs_now(self.home / "stamp")
        dirs: dict[str, int] = {}
        files: dict[str, int] = {}
        self._walk_from("", str(self._workdir), self._skipped(), dirs, files)
        return Walk(stamp, dirs, files)

    def _skipped(self) -> set[str]:
        return set(self._latest.ignored) if self._latest is not None else set()

    def _walk_path(self, path: str, dirs: dict[str, int], files: dict[str, int]) -> None:
        full = os.path.join(self._workdir, path)
        try:
            mode = os.lstat(full).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return
        if stat.S_ISDIR(mode):
            dirs[self._check(path)] = stat.S_IMODE(mode)
            self._walk_from(path, full, (), dirs, files)
        elif stat.S_ISREG(mode):
            files[path] = stat.S_IMODE(mode)

    def _walk_from(
        self,
        top: str,
        full: str,
        skip: Collection[str],
        dirs: dict[str, int],
        files: dict[str, int],
    ) -> None:
        """Every folder and every file under ``top`` (not in ``skip``), with their bits.

        The top ``.git`` and the insides of a folder holding a ``.git`` (a submodule or a
        nested repository, which git does not look into) are left out.
        """
        ignored = skip
        stack = [(top, full)]
        while stack:
            rel, path = stack.pop()
            found = listing_of(path, rel or ".")
            if rel and any(item.name == ".git" for item in found):
                continue
            for item in found:
                sub = join_path(rel, item.name)
                if sub in ignored or sub == ".git":
                    continue
                mode = item.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    dirs[self._check(sub)] = stat.S_IMODE(mode)
                    stack.append((sub, item.path))
                elif stat.S_ISREG(mode):
                    files[sub] = stat.S_IMODE(mode)

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

    def _capture(self, full: str, old: Entry | None, stamp: int) -> Entry | None:
        """The entry of the ignored file, symlink or folder at ``full`` (None if there is
        none to keep); an unchanged file (lstat says so) is not read."""
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return None
        if old is not None and is_clean(old, st, stamp):
            return old
        mode = stat.S_IMODE(st.st_mode) & 0o777  # what a tree entry holds (as filesystem_copy)
        if stat.S_ISREG(st.st_mode):
            try:
                fd = os.open(full, READ_FLAGS)
            except OSError as exc:
                raise SandboxError(
                    f"cannot read the ignored file {full!r} ({exc.strerror})",
                    "give its owner read permission, or delete it",
                ) from None
            try:
                oid, size = self._store.put_fd(fd, st.st_size)
            finally:
                os.close(fd)
            return Entry(FILE, mode, size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns, oid)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(full)
            return Entry(SYMLINK, LINK_MODE, len(target), 0, 0, 0, target)
        if stat.S_ISDIR(st.st_mode):
            inner = old.ref if old is not None and old.kind == DIRECTORY else None
            return Entry(DIRECTORY, mode, 0, 0, 0, 0, self._capture_dir(full, inner, stamp))
        return None  # a socket, FIFO or device: kept by neither git nor us

    def _capture_dir(self, full: str, cached: str | None, stamp: int) -> str:
        before = self._cache_tree(cached)
        tree: dict[str, Entry] = {}
        names = sorted(item.name for item in listing_of(full, full))
        for name in names:
            old = before.get(name)
            if old is None:
                try:
                    check_name(name, top=False)
                except UnsafeInputError as exc:
                    raise SandboxError(
                        f"cannot keep {os.path.join(full, name)!r} ({exc})", "rename it"
                    ) from None
            entry = self._capture(os.path.join(full, name), old, stamp)
            if entry is not None:
                tree[name] = entry
        return cached if cached is not None and tree == before else self._trees.save(tree)

    def _cache_tree(self, oid: str | None) -> dict[str, Entry]:
        if oid is None:
            return {}
        try:
            return self._trees.load(oid)
        except (CheckpointMissingError, UnsafeInputError):
            return {}  # only means reading the files again

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

    # ---------------------------------------------------------------------- restoring

    @staticmethod
    def can_start_from(have: Record, want: Record) -> bool:
        """Whether :meth:`restore` from ``have`` needs only the paths git wrote: not when
        the usual permission bits differ (then every file may need a chmod)."""
        return (have.file_mode, have.exec_mode) == (want.file_mode, want.exec_mode)

    def clear_ignored(self, have: Record, want: Record) -> None:
        """Remove the ignored paths of ``have`` that ``want`` does not have as they are.

        Run before git rolls back, so none is in the way of a file git writes.
        """
        stale = [
            path
            for path, entry in have.ignored.items()
            if (found := want.ignored.get(path)) is None
            or found.kind != entry.kind
            or (entry.kind == SYMLINK and found.ref != entry.ref)
        ]
        if stale:
            with TreeWriter(self._workdir, durable=False) as writer:
                for path in sorted(stale, reverse=True):
                    remove_quietly(writer, path)

    def restore(self, have: Record, want: Record, written: Mapping[str, str] | None) -> None:
        """Make what git does not keep equal to ``want``, git having rolled back already.

        ``have`` is the state git rolled back from, and ``written`` the paths git wrote
        (the two trees' differences, each with ``diff-tree``'s status letter), when the
        rollback started from a fresh checkpoint: only what the two records, or those
        paths, differ in is examined. With ``written`` None, ``have`` is a scan taken after
        git's rollback (``files`` known), and every file's bits are compared. Folders are
        made first, then the ignored paths, then files' bits, then folders' bits (deepest
        first, so a read-only folder is filled before it closes).
        """
        if written is None:  # else done before git ran: git may have written there since
            self.clear_ignored(have, want)
        dir_modes: list[tuple[str, int]] = []
        with TreeWriter(self._workdir, durable=False) as writer:
            self._restore_dirs(writer, have, want, written, dir_modes)
            for path, entry in sorted(want.ignored.items()):
                self._put(writer, path, have.ignored.get(path), entry, dir_modes)
            self._restore_modes(writer, have, want, written)
            for path, mode in sorted(dir_modes, reverse=True):
                writer.set_mode(path, mode)
        self._latest = want

    def _restore_dirs(
        self,
        writer: TreeWriter,
        have: Record,
        want: Record,
        written: Mapping[str, str] | None,
        dir_modes: list[tuple[str, int]],
    ) -> None:
        removed: set[str] = set()
        for path in sorted(path for path in have.dirs if path not in want.dirs):
            parts = path.split("/")
            if any("/".join(parts[:depth]) in removed for depth in range(1, len(parts))):
                continue
            st = writer.lstat(path)
            if st is not None and stat.S_ISDIR(st.st_mode):  # else git put a file there
                remove_quietly(writer, path)
                removed.add(path)
        if written is None:
            suspects: Collection[str] = want.dirs
        else:
            # Folders git may have made (with the umask's bits) or removed (left empty): above
            # a path added or deleted. A path both trees hold (M) is rewritten in its folder.
            touched = {
                path.rsplit("/", depth)[0]
                for path, status in written.items()
                if status != "M"
                for depth in range(1, path.count("/") + 1)
            }
            suspects = {
                path
                for path, mode in want.dirs.items()
                if path in touched or have.dirs.get(path) != mode
            }
        for path in sorted(suspects):
            mode = want.dirs[path]
            st = writer.lstat(path)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                remove_quietly(writer, path)
                st = None
            if st is None:
                writer.make_dir(path)
            if st is None or stat.S_IMODE(st.st_mode) != mode:
                dir_modes.append((path, mode))

    def _restore_modes(
        self, writer: TreeWriter, have: Record, want: Record, written: Mapping[str, str] | None
    ) -> None:
        if written is None:
            assert have.files is not None, "a full restore starts from a scan"
            current = have.files
            for path, mode in current.items():
                expected = want.mode_of(path, mode)
                if mode != expected:
                    writer.set_mode(self._check(path), expected)
            return
        suspects = {path for path, mode in have.modes.items() if want.modes.get(path) != mode}
        suspects.update(path for path, mode in want.modes.items() if have.modes.get(path) != mode)
        if _as_git_writes(want):
            # git gave the files it wrote the usual bits already: only those ``want`` gives
            # other bits can be wrong.
            suspects.update(written.keys() & want.modes.keys())
        else:
            suspects.update(written)
        for path in sorted(suspects):
            try:
                check_entry_path(path)
            except UnsafeInputError:
                continue  # a name git wrote that a record cannot hold has the usual bits
            st = writer.lstat(path)
            if st is None or not stat.S_ISREG(st.st_mode):
                continue
            expected = want.mode_of(path, st.st_mode)
            if stat.S_IMODE(st.st_mode) != expected:
                writer.set_mode(path, expected)

    def _put(
        self,
        writer: TreeWriter,
        path: str,
        have: Entry | None,
        want: Entry,
        dir_modes: list[tuple[str, int]],
    ) -> None:
        """Make ``path`` what ``want`` says, ``have`` being what it is (None: nothing)."""
        if have is not None and have.kind != want.kind:
            remove_quietly(writer, path)
            have = None
        if want.kind == FILE:
            if have is None or not have.same_content(want):
                writer.write_object(path, self._store, want, mtime_ns=want.mtime_ns or None)
        elif want.kind == SYMLINK:
            if have is None or have.ref != want.ref:
                writer.symlink(path, want.ref, inside=False)
        else:
            if have is None:
                writer.make_dir(path)
            if have is None or have.ref != want.ref:
                inner = self._trees.load(have.ref) if have is not None else {}
                wanted = self._trees.load(want.ref)
                for name in sorted(inner.keys() - wanted.keys(), reverse=True):
                    remove_quietly(writer, join_path(path, name))
                for name, entry in sorted(wanted.items()):
                    self._put(writer, join_path(path, name), inner.get(name), entry, dir_modes)
            if have is None or have.mode != want.mode:
                dir_modes.append((path, want.mode))


def _as_git_writes(record: Record) -> bool:
    """Whether ``record``'s usual bits are those git gives a file it writes now (its mode,
    0666 or 0777, less the umask git inherits from this process)."""
    mask = umask_now()
    return (
        mask is not None
        and not mask & stat.S_IXUSR
        and (record.file_mode, record.exec_mode) == (0o666 & ~mask, 0o777 & ~mask)
    )
