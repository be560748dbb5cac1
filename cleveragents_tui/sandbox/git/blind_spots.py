"""What git does not keep of a git_worktree sandbox, kept beside each of its checkpoints.

A :class:`.records.Record` holds what git does not keep of one state (see
:mod:`.records`): :mod:`.blind_spot_store` stores them, :mod:`.blind_spot_scan` takes them,
and this module restores them.

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

import stat
from collections.abc import Collection, Mapping
from pathlib import Path

from cleveragents_tui.sandbox.git.blind_spot_scan import ScanningSpots
from cleveragents_tui.sandbox.git.records import Record, remove_quietly, umask_now
from cleveragents_tui.sandbox.objectstore.names import check_entry_path, join_path
from cleveragents_tui.sandbox.objectstore.tree_writer import TreeWriter
from cleveragents_tui.sandbox.objectstore.trees import FILE, SYMLINK, Entry
from cleveragents_tui.sandbox.safety import UnsafeInputError

DIRNAME = "blind-spots"
# What git lists as ignored: wholly ignored folders once (``build/``), empty ones included.
LIST_IGNORED = ("ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory")


class BlindSpots(ScanningSpots):
    """The records of one git_worktree sandbox, in ``home``; ``workdir`` is its worktree.

    One object per sandbox object, used from one thread at a time; records are cached in
    memory once read or made.
    """

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
