"""File operations of the file tools, on a sandbox's workdir or through an overlay sandbox.

Every path is checked first: :func:`safety.safe_relative_path` (no ``..``, no absolute path,
no NUL, no backslash, not ``.git/...``), no ``.git`` component anywhere, not the sandbox
itself. On a workdir, :func:`safety.resolve_inside` then refuses a parent symlink leading
out; a symlink as the last component is refused when writing, removed (not its target) when
deleting, and followed when reading only if it lands inside the sandbox. Writes go to a new
file renamed over the target, so a hard link to a file outside is never written through.
Special files (FIFOs, devices, sockets) are neither read nor written.

``on_change`` is called as soon as something was changed (before a later step can fail),
and only then: the tools pass ``note_write`` of the plan's sandboxes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import secrets
import stat
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Protocol

from cleveragents_tui.sandbox.base import Sandbox
from cleveragents_tui.sandbox.overlay import EntryKind, OverlaySandbox
from cleveragents_tui.sandbox.safety import UnsafeInputError, resolve_inside, safe_relative_path

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MAX_LINKS = 16
_TEMP_PREFIX = "cleveragents-write-"
NEW_FILE_MODE = 0o644


class Kind(StrEnum):
    FILE = "file"
    DIRECTORY = "folder"
    SYMLINK = "symlink"
    OTHER = "special file"
    MISSING = "missing"


class FileRefused(Exception):
    """The operation was not done (or stopped); the message is one line for the agent."""


def check_path(raw: str) -> str:
    """The canonical relative form of ``raw``; :class:`UnsafeInputError` when it may escape."""
    path = safe_relative_path(raw)
    if not path.parts:
        raise UnsafeInputError(f"path {raw!r} names the sandbox itself", "name a file inside it")
    if ".git" in path.parts:
        raise UnsafeInputError(
            f"path {raw!r} points into git's metadata", "use a working-tree path"
        )
    return str(path)


class SandboxFiles(Protocol):
    """What the file tools need of a sandbox. Paths are checked with :func:`check_path`."""

    def kind(self, path: str) -> Kind: ...

    def read(self, path: str, limit: int | None) -> tuple[bytes, int]:
        """At most ``limit`` bytes of a regular file (all when None), and its full size."""
        ...

    def write(self, path: str, data: bytes, mode: int | None) -> bool:
        """Write a regular file, creating parent folders; returns whether it was created.

        ``mode`` None keeps an existing file's mode (a new file gets 0o644).
        """
        ...

    def delete(self, path: str) -> None:
        """Remove a file or symlink (never a folder)."""
        ...


def files_of(sandbox: Sandbox, on_change: Callable[[], None]) -> SandboxFiles | None:
    """The file operations of ``sandbox``; None when it has no files (a database)."""
    if isinstance(sandbox, OverlaySandbox):
        return OverlayFiles(sandbox, on_change)
    workdir = sandbox.workdir
    if workdir is None:
        return None
    return WorkdirFiles(workdir, on_change)


def _refusal(exc: OSError, path: str) -> FileRefused:
    reasons = {
        errno.ENOENT: "does not exist",
        errno.EISDIR: "is a folder",
        errno.ENOTDIR: "has a parent that is not a folder",
        errno.ELOOP: "is a symlink (write the file it points to)",
        errno.EEXIST: "has a parent that is not a folder",
        errno.EACCES: "is not accessible (permission denied)",
        errno.EPERM: "is not accessible (operation not permitted)",
        errno.ENXIO: "is a special file",
        errno.ENOSPC: "cannot be written: no space left on the device",
    }
    reason = reasons.get(exc.errno or 0, exc.strerror or type(exc).__name__)
    return FileRefused(f"{path} {reason}")


class WorkdirFiles:
    """Files of a sandbox that is a directory (git_worktree, filesystem_copy, none)."""

    def __init__(self, root: Path, on_change: Callable[[], None]) -> None:
        self._root = root.resolve()
        self._on_change = on_change

    def _target(self, path: str) -> Path:
        return resolve_inside(self._root, check_path(path))

    def kind(self, path: str) -> Kind:
        try:
            st = os.lstat(self._target(path))
        except FileNotFoundError:
            return Kind.MISSING
        except OSError as exc:
            raise _refusal(exc, path) from exc
        return _kind_of(st.st_mode)

    def read(self, path: str, limit: int | None) -> tuple[bytes, int]:
        target = self._target(path)
        real = Path(os.path.realpath(target))
        if real != self._root and self._root not in real.parents:
            raise FileRefused(f"{path} is a symlink leading outside the sandbox")
        check_path(real.relative_to(self._root).as_posix())  # a link into .git is refused too
        try:
            fd = os.open(real, _READ_FLAGS)
        except OSError as exc:
            raise _refusal(exc, path) from exc
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise FileRefused(f"{path} is a {_kind_of(st.st_mode)}, not a regular file")
            data = handle.read() if limit is None else handle.read(limit)
        return data, max(st.st_size, len(data))

    def write(self, path: str, data: bytes, mode: int | None) -> bool:
        """Write a new file next to the target, then rename it over the target.

        The rename replaces the directory entry, never the target's content in place: a file
        that is a hard link to something outside the sandbox is detached, not written through,
        and a failed write leaves the old content whole.
        """
        target = self._target(path)
        self._make_parents(target, path)
        kind = self.kind(path)
        if kind is Kind.SYMLINK:
            raise FileRefused(f"{path} is a symlink (write the file it points to)")
        if kind is Kind.DIRECTORY:
            raise FileRefused(f"{path} is a folder")
        if kind is not Kind.FILE and kind is not Kind.MISSING:
            raise FileRefused(f"{path} is a {kind}, not a regular file")
        created = kind is Kind.MISSING
        if mode is None:
            mode = NEW_FILE_MODE if created else stat.S_IMODE(os.lstat(target).st_mode)
        temporary = target.with_name(f".{_TEMP_PREFIX}{secrets.token_hex(8)}")
        try:
            fd = os.open(temporary, _WRITE_FLAGS | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError as exc:
            raise _refusal(exc, path) from exc
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            os.replace(temporary, target)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise _refusal(exc, path) from exc
        self._on_change()
        return created

    def _make_parents(self, target: Path, path: str) -> None:
        missing: list[Path] = []
        parent = target.parent
        while parent != self._root and not os.path.lexists(parent):
            missing.append(parent)
            parent = parent.parent
        for folder in reversed(missing):
            try:
                os.mkdir(folder, 0o755)
            except OSError as exc:
                raise _refusal(exc, path) from exc
            self._on_change()
        if not target.parent.is_dir():
            raise FileRefused(f"{path} has a parent that is not a folder")

    def delete(self, path: str) -> None:
        target = self._target(path)
        kind = self.kind(path)
        if kind is Kind.MISSING:
            raise FileRefused(f"{path} does not exist")
        if kind is Kind.DIRECTORY:
            raise FileRefused(f"{path} is a folder; local/delete-file removes files only")
        try:
            os.unlink(target)
        except OSError as exc:
            raise _refusal(exc, path) from exc
        self._on_change()


def _kind_of(mode: int) -> Kind:
    if stat.S_ISREG(mode):
        return Kind.FILE
    if stat.S_ISDIR(mode):
        return Kind.DIRECTORY
    if stat.S_ISLNK(mode):
        return Kind.SYMLINK
    return Kind.OTHER


_OVERLAY_KINDS = {
    EntryKind.FILE: Kind.FILE,
    EntryKind.DIRECTORY: Kind.DIRECTORY,
    EntryKind.SYMLINK: Kind.SYMLINK,
    EntryKind.OTHER: Kind.OTHER,
}


class OverlayFiles:
    """Files of an overlay sandbox, through its own checked file operations (no workdir)."""

    def __init__(self, sandbox: OverlaySandbox, on_change: Callable[[], None]) -> None:
        self._sandbox = sandbox
        self._on_change = on_change

    def kind(self, path: str) -> Kind:
        entry = self._sandbox.stat(check_path(path))
        return Kind.MISSING if entry is None else _OVERLAY_KINDS[entry.kind]

    def _follow(self, path: str) -> str:
        """The path a chain of symlinks at ``path`` ends at (links stay inside by design)."""
        current = check_path(path)
        for _ in range(_MAX_LINKS):
            if self.kind(current) is not Kind.SYMLINK:
                return current
            target = self._sandbox.read_link(current)
            joined = posixpath.normpath(posixpath.join(posixpath.dirname(current), target))
            if joined.startswith("../") or joined in ("..", "."):
                raise FileRefused(f"{path} is a symlink leading outside the sandbox")
            current = check_path(str(PurePosixPath(joined)))
        raise FileRefused(f"{path} is a chain of more than {_MAX_LINKS} symlinks")

    def read(self, path: str, limit: int | None) -> tuple[bytes, int]:
        real = self._follow(path)
        kind = self.kind(real)
        if kind is Kind.MISSING:
            raise FileRefused(f"{path} does not exist")
        if kind is not Kind.FILE:
            raise FileRefused(f"{path} is a {kind}, not a regular file")
        data = self._sandbox.read_bytes(real)
        return (data if limit is None else data[:limit]), len(data)

    def write(self, path: str, data: bytes, mode: int | None) -> bool:
        path = check_path(path)
        kind = self.kind(path)
        if kind is Kind.DIRECTORY:
            raise FileRefused(f"{path} is a folder")
        if kind is Kind.SYMLINK:
            raise FileRefused(f"{path} is a symlink (write the file it points to)")
        if kind is Kind.OTHER:
            raise FileRefused(f"{path} is a special file, not a regular file")
        created = kind is Kind.MISSING
        try:
            self._sandbox.write_bytes(
                path, data, mode if mode is not None else NEW_FILE_MODE if created else None
            )
        except OSError as exc:
            raise _refusal(exc, path) from exc
        self._on_change()
        return created

    def delete(self, path: str) -> None:
        path = check_path(path)
        kind = self.kind(path)
        if kind is Kind.MISSING:
            raise FileRefused(f"{path} does not exist")
        if kind is Kind.DIRECTORY:
            raise FileRefused(f"{path} is a folder; local/delete-file removes files only")
        self._sandbox.delete(path)
        self._on_change()
