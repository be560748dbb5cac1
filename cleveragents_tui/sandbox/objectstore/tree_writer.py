"""Changing and reading a directory tree by relative path without ever leaving it.

:class:`TreeWriter` is the only way the filesystem_copy and overlay strategies change a
directory on disk: every path is validated, every component is opened with ``O_NOFOLLOW``
relative to its parent's descriptor, and every symbolic link it creates must point inside
the tree (DESIGN.md section 8). Nothing it does can reach outside the root it was given.
The ``*_path`` readers follow no symbolic link either.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from cleveragents_tui import failpoints
from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.objectstore.files import (
    DIR_FLAGS,
    READ_FLAGS,
    hash_fd,
    open_regular,
    read_all,
)
from cleveragents_tui.sandbox.objectstore.names import (
    check_entry_path,
    check_link_target,
    split_path,
)
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.objectstore.trees import Entry


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

    def __exit__(self, *exc_info: object) -> None:
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
        try:
            fd, name = self._parent(rel)
        except (FileNotFoundError, SandboxError):
            if self._gone_above(rel):
                return  # a folder above it is gone or a file now (an Apply a crash stopped)
            raise
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

    def symlink(self, rel: str, target: str, *, inside: bool = True) -> None:
        """Make ``rel`` a symlink to ``target``, which must point inside the tree unless
        ``inside`` is False (what git keeps of a worktree: any target, as git restores it).
        Either way nothing here follows it."""
        if inside:
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

    def _gone_above(self, rel: str) -> bool:
        """Whether a folder above ``rel`` is missing or a regular file (not a symlink: that
        stays refused), looked at from the top down so no link on the way is followed."""
        parts = rel.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            try:
                st = os.stat("/".join(parts[:depth]), dir_fd=self._fds[""], follow_symlinks=False)
            except FileNotFoundError:
                return True
            if not stat.S_ISDIR(st.st_mode):
                return stat.S_ISREG(st.st_mode)
        return False

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


_T = TypeVar("_T")


def _on_path_file(root: Path, rel: str, use: Callable[[int], _T]) -> _T:
    """``use`` applied to a descriptor of regular file ``rel`` under ``root``, following no
    symlink."""
    parent, name = split_path(rel)
    fd = open_path_dir(root, parent)
    try:
        file_fd = open_regular(fd, name)
    finally:
        os.close(fd)
    try:
        return use(file_fd)
    finally:
        os.close(file_fd)


def read_path(root: Path, rel: str) -> bytes:
    """The bytes of regular file ``rel`` under ``root``, following no symlink."""
    return _on_path_file(root, rel, read_all)


def hash_path(root: Path, rel: str) -> str:
    return _on_path_file(root, rel, hash_fd)


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
