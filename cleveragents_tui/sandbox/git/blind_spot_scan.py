"""Taking a record of what git does not keep: every folder, ignored path and permission
bit of the worktree.

It costs one ``lstat`` of every file and folder, while git lists what is ignored; an
ignored file is read only when ``lstat`` says it changed since the last record.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Collection

from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.git.blind_spot_store import StoredSpots
from cleveragents_tui.sandbox.git.records import Record, Walk, leave_out, listing_of, usual_mode
from cleveragents_tui.sandbox.objectstore.files import READ_FLAGS, fs_now
from cleveragents_tui.sandbox.objectstore.names import check_name, join_path
from cleveragents_tui.sandbox.objectstore.trees import (
    DIRECTORY,
    FILE,
    LINK_MODE,
    SYMLINK,
    Entry,
    is_clean,
)
from cleveragents_tui.sandbox.safety import UnsafeInputError

_PLAIN = 0o644


class ScanningSpots(StoredSpots):
    """Scan the worktree into a :class:`.records.Record`."""

    # ---------------------------------------------------------------------- recording

    def scan(self, listing: bytes, usual: Record | None, walked: Walk | None = None) -> Record:
        """The worktree's present state; ``listing`` is the output of
        :data:`.blind_spots.LIST_IGNORED`.

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

    def walk(self) -> Walk:
        """Every folder and file of the worktree with its bits, for :meth:`scan`; run while
        git lists what is ignored (``git status`` and :data:`.blind_spots.LIST_IGNORED` run
        meanwhile, in processes of their own). The paths the last record found ignored are
        not entered; the scan sorts out what was ignored, or stopped being so, since."""
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
