"""File operations of the file tools, on a sandbox's workdir or through an overlay sandbox.

Every path is checked first: :func:`safety.safe_relative_path` (no ``..``, no absolute path,
no NUL, no backslash, not ``.git/...``), no ``.git`` component anywhere, not the sandbox
itself. On a workdir, :func:`safety.resolve_inside` then refuses a parent symlink leading
out; a symlink as the last component is refused when writing, removed (not its target) when
deleting, and followed when reading only if it lands inside the sandbox. Writes go to a new
file renamed over the target, so a hard link to a file outside is never written through.
Special files (FIFOs, devices, sockets) are neither read nor written.

The tree operations (:meth:`SandboxFiles.move`, ``remove``, ``make_dir``, ``symlink``,
``chmod``) keep the sandbox one its checkpoints can restore exactly: a symlink's target must
stay inside wherever the link sits (:func:`check_target`, the rule the filesystem_copy and
overlay checkpoints enforce), a move refuses to carry a link to where it would point
outside, nothing holding a ``.git`` (a nested repository) is moved or removed, and modes keep
the owner's access the sandbox needs to read files and walk folders (:func:`check_mode`).

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
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import Protocol

from cleveragents_tui.sandbox.base import Sandbox, SandboxError
from cleveragents_tui.sandbox.objectstore.names import check_link_target
from cleveragents_tui.sandbox.objectstore.tree_writer import TreeWriter, remove_tree
from cleveragents_tui.sandbox.overlay import EntryKind, OverlaySandbox
from cleveragents_tui.sandbox.safety import UnsafeInputError, resolve_inside, safe_relative_path

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_MAX_LINKS = 16
_TEMP_PREFIX = "cleveragents-write-"
NEW_FILE_MODE = 0o644
NEW_FOLDER_MODE = 0o755
FILE_NEEDS = 0o400  # the owner must read a file: every checkpoint reads it
FOLDER_NEEDS = 0o700  # and list, enter and write a folder: checkpoints walk, rollbacks write


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


def check_target(link: str, target: str) -> str:
    """A symlink target that stays inside the sandbox from ``link`` (a checked path).

    Relative only, its ``..`` first and climbing no higher than the link's folder
    (:func:`check_link_target`), and not into git's metadata.
    """
    check_link_target(link, target)
    landed = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    if ".git" in landed.split("/"):
        raise UnsafeInputError(
            f"symlink {link!r} -> {target!r} points into git's metadata",
            "point it at a working-tree path",
        )
    return target


def check_mode(path: str, mode: int, kind: Kind) -> int:
    """Permission bits (0-0777) that leave the owner the access the sandbox needs."""
    if kind is Kind.SYMLINK:
        raise FileRefused(f"{path} is a symlink; symlinks have no mode of their own")
    if kind not in (Kind.FILE, Kind.DIRECTORY):
        raise FileRefused(f"{path} is a {kind}; only files and folders get a mode")
    needs = FOLDER_NEEDS if kind is Kind.DIRECTORY else FILE_NEEDS
    if not 0 <= mode <= 0o777 or mode & needs != needs:
        raise FileRefused(
            f"mode {mode:04o} is not allowed for {kind} {path}: give permission bits "
            f"(0000-0777) that keep at least {needs:04o} for the owner"
        )
    return mode


def moved_path(path: str, source: str, destination: str) -> str:
    """Where ``path`` (``source`` or below it) lands when ``source`` moves to ``destination``."""
    return destination + path[len(source) :]


def check_move(source: str, destination: str) -> None:
    if destination == source or destination.startswith(source + "/"):
        raise FileRefused(f"cannot move {source} into itself ({destination})")


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

    def remove(self, path: str) -> Kind:
        """Remove a file, symlink or folder (with everything in it); returns what it was."""
        ...

    def move(self, source: str, destination: str) -> Kind:
        """Rename a file, symlink or folder to a path that does not exist yet (missing parent
        folders are made); returns what was moved."""
        ...

    def make_dir(self, path: str, mode: int) -> bool:
        """Create a folder and its missing parents; False when it already was a folder."""
        ...

    def symlink(self, path: str, target: str) -> None:
        """Create a symlink (missing parent folders are made); ``path`` must not exist."""
        ...

    def chmod(self, path: str, mode: int) -> Kind:
        """Set a file's or folder's permission bits (:func:`check_mode`); returns its kind."""
        ...


def files_of(sandbox: Sandbox, on_change: Callable[[], None]) -> SandboxFiles | None:
    """The file operations of ``sandbox``; None when it has no files (a database)."""
    if isinstance(sandbox, OverlaySandbox):
        return OverlayFiles(sandbox, on_change)
    workdir = sandbox.workdir
    if workdir is None:
        return None
    return WorkdirFiles(workdir, on_change)


def _check_deletable(path: str, kind: Kind) -> None:
    """local/delete-file removes files and symlinks only."""
    if kind is Kind.MISSING:
        raise FileRefused(f"{path} does not exist")
    if kind is Kind.DIRECTORY:
        raise FileRefused(f"{path} is a folder; local/delete-file removes files only")


def _folder_exists(path: str, kind: Kind) -> bool:
    """Whether make_dir has nothing to do; refused when something else is at ``path``."""
    if kind is Kind.DIRECTORY:
        return True
    if kind is not Kind.MISSING:
        raise FileRefused(f"{path} exists and is a {kind}, not a folder")
    return False


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
        _check_deletable(path, kind)
        try:
            os.unlink(target)
        except OSError as exc:
            raise _refusal(exc, path) from exc
        self._on_change()

    def remove(self, path: str) -> Kind:
        target = self._target(path)
        kind = self.kind(path)
        if kind is Kind.MISSING:
            raise FileRefused(f"{path} does not exist")
        if kind is not Kind.DIRECTORY:
            self.delete(path)
            return kind
        self._refuse_nested_git(target, path)
        try:
            remove_tree(target)
        except OSError as exc:
            self._on_change()  # part of the folder may be gone
            raise _refusal(exc, path) from exc
        self._on_change()
        return kind

    def move(self, source: str, destination: str) -> Kind:
        source, destination = check_path(source), check_path(destination)
        check_move(source, destination)
        old, new = self._target(source), self._target(destination)
        kind = self.kind(source)
        if kind is Kind.MISSING:
            raise FileRefused(f"{source} does not exist")
        if kind is Kind.OTHER:
            raise FileRefused(f"{source} is a special file; only files, symlinks and folders move")
        if self.kind(destination) is not Kind.MISSING:
            raise FileRefused(f"{destination} already exists (delete it first, or move elsewhere)")
        if kind is Kind.DIRECTORY:
            self._refuse_nested_git(old, source)
        for link, target in self._links(old, source):
            check_target(moved_path(link, source, destination), target)
        self._make_parents(new, destination)
        try:
            os.rename(old, new)
        except OSError as exc:
            raise _refusal(exc, source) from exc
        self._on_change()
        return kind

    def make_dir(self, path: str, mode: int) -> bool:
        path = check_path(path)
        check_mode(path, mode, Kind.DIRECTORY)
        target = self._target(path)
        kind = self.kind(path)
        if _folder_exists(path, kind):
            return False
        self._make_parents(target, path)
        with self._writer(path) as writer:
            writer.make_dir(path)
            self._on_change()
            writer.set_mode(path, mode)
        return True

    def symlink(self, path: str, target: str) -> None:
        path = check_path(path)
        check_target(path, target)
        link = self._target(path)
        if self.kind(path) is not Kind.MISSING:
            raise FileRefused(f"{path} already exists (delete it first)")
        self._make_parents(link, path)
        with self._writer(path) as writer:
            writer.symlink(path, target)
        self._on_change()

    def chmod(self, path: str, mode: int) -> Kind:
        path = check_path(path)
        self._target(path)
        kind = self.kind(path)
        if kind is Kind.MISSING:
            raise FileRefused(f"{path} does not exist")
        check_mode(path, mode, kind)
        with self._writer(path) as writer:
            writer.set_mode(path, mode)
        self._on_change()
        return kind

    def _writer(self, path: str) -> TreeWriter:
        """A writer that opens every folder on the way without following a symlink."""
        try:
            return TreeWriter(self._root, durable=False)
        except OSError as exc:
            raise _refusal(exc, path) from exc

    def _walk(self, folder: Path, rel: str) -> list[tuple[str, os.DirEntry[str]]]:
        """Every entry below ``folder`` (no symlink followed), with its relative path."""
        found: list[tuple[str, os.DirEntry[str]]] = []
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    child = f"{rel}/{entry.name}"
                    found.append((child, entry))
                    if entry.is_dir(follow_symlinks=False):
                        found.extend(self._walk(Path(entry.path), child))
        except OSError as exc:
            raise _refusal(exc, rel) from exc
        return found

    def _refuse_nested_git(self, folder: Path, rel: str) -> None:
        for child, entry in self._walk(folder, rel):
            if entry.name == ".git":
                raise FileRefused(
                    f"{rel} holds git metadata ({child}); a nested repository is not moved "
                    "or removed by the file tools"
                )

    def _links(self, target: Path, rel: str) -> list[tuple[str, str]]:
        """Every symlink at or below ``target``: (relative path, link target)."""
        if os.path.islink(target):
            return [(rel, os.readlink(target))]
        if not os.path.isdir(target):
            return []
        return [
            (child, os.readlink(entry.path))
            for child, entry in self._walk(target, rel)
            if entry.is_symlink()
        ]


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
        _check_deletable(path, kind)
        self._sandbox.delete(path)
        self._on_change()

    def remove(self, path: str) -> Kind:
        path = check_path(path)
        kind = self.kind(path)
        if kind is Kind.MISSING:
            raise FileRefused(f"{path} does not exist")
        if kind is Kind.DIRECTORY:
            self._refuse_nested_git(path)
        self._sandbox.delete(path)
        self._on_change()
        return kind

    def move(self, source: str, destination: str) -> Kind:
        source, destination = check_path(source), check_path(destination)
        check_move(source, destination)
        kind = self.kind(source)
        if kind is Kind.MISSING:
            raise FileRefused(f"{source} does not exist")
        if self.kind(destination) is not Kind.MISSING:
            raise FileRefused(f"{destination} already exists (delete it first, or move elsewhere)")
        if kind is Kind.DIRECTORY:
            self._refuse_nested_git(source)
        links = [source] if kind is Kind.SYMLINK else []
        if kind is Kind.DIRECTORY:
            links = [e.path for e in self._sandbox.walk(source) if e.kind is EntryKind.SYMLINK]
        for link in links:
            check_target(moved_path(link, source, destination), self._sandbox.read_link(link))
        with self._changing(source):
            self._sandbox.move(source, destination)
        return kind

    def make_dir(self, path: str, mode: int) -> bool:
        path = check_path(path)
        check_mode(path, mode, Kind.DIRECTORY)
        kind = self.kind(path)
        if _folder_exists(path, kind):
            return False
        with self._changing(path):
            self._sandbox.make_dirs(path, mode)
        return True

    def symlink(self, path: str, target: str) -> None:
        path = check_path(path)
        check_target(path, target)
        if self.kind(path) is not Kind.MISSING:
            raise FileRefused(f"{path} already exists (delete it first)")
        with self._changing(path):
            self._sandbox.symlink(path, target)

    def chmod(self, path: str, mode: int) -> Kind:
        path = check_path(path)
        kind = self.kind(path)
        if kind is Kind.MISSING:
            raise FileRefused(f"{path} does not exist")
        check_mode(path, mode, kind)
        with self._changing(path):
            self._sandbox.chmod(path, mode)
        return kind

    @contextlib.contextmanager
    def _changing(self, path: str) -> Iterator[None]:
        """A change to the overlay: its refusal as one about ``path``; then ``on_change``."""
        try:
            yield
        except (OSError, SandboxError) as exc:
            raise _overlay_refusal(exc, path) from exc
        self._on_change()

    def _refuse_nested_git(self, path: str) -> None:
        for entry in self._sandbox.walk(path):
            if entry.path.rsplit("/", 1)[-1] == ".git":
                raise FileRefused(
                    f"{path} holds git metadata ({entry.path}); a nested repository is not "
                    "moved or removed by the file tools"
                )


def _overlay_refusal(exc: Exception, path: str) -> FileRefused:
    if isinstance(exc, OSError):
        return _refusal(exc, path)
    return FileRefused(f"{path}: {exc}")
