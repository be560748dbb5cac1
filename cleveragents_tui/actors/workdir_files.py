"""File operations on a sandbox that is a directory (git_worktree, filesystem_copy, none).

On a workdir, :func:`safety.resolve_inside` refuses a parent symlink leading out; a symlink as
the last component is refused when writing, removed (not its target) when deleting, and
followed when reading only if it lands inside the sandbox. Writes go to a new file renamed over
the target, so a hard link to a file outside is never written through. Special files (FIFOs,
devices, sockets) are neither read nor written. A move refuses to carry a link to where it
would point outside, and nothing holding a ``.git`` (a nested repository) is moved or removed.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from cleveragents_tui.actors.file_rules import (
    NEW_FILE_MODE,
    FileRefused,
    Kind,
    Listed,
    check_deletable,
    check_exists,
    check_mode,
    check_move,
    check_path,
    check_target,
    folder_exists,
    kind_of,
    moved_path,
    refusal,
)
from cleveragents_tui.actors.listed_reads import read_listed
from cleveragents_tui.sandbox.objectstore.tree_writer import TreeWriter, remove_tree
from cleveragents_tui.sandbox.safety import resolve_inside

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_TEMP_PREFIX = "cleveragents-write-"


class WorkdirFiles:
    """Files of a sandbox that is a directory (git_worktree, filesystem_copy, none).

    ``announce``, if given, is called before each change with the paths it may change
    (checked, relative), or None when that is a whole folder's contents: git_worktree's
    next checkpoint then examines those paths alone (:meth:`HandsOutPaths.hand_out`)."""

    def __init__(
        self,
        root: Path,
        on_change: Callable[[], None],
        announce: Callable[[list[str] | None], object] | None = None,
    ) -> None:
        self._root = root.resolve()
        self._on_change = on_change
        self._announce = announce or (lambda paths: None)

    def _target(self, path: str) -> Path:
        return resolve_inside(self._root, check_path(path))

    def kind(self, path: str) -> Kind:
        return self._kind_at(self._target(path), path)

    def _kind_at(self, target: Path, path: str) -> Kind:
        """What is at ``target``, ``path`` already resolved (resolving is a walk up the tree)."""
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            return Kind.MISSING
        except OSError as exc:
            raise refusal(exc, path) from exc
        return kind_of(st.st_mode)

    def read(self, path: str, limit: int | None) -> tuple[bytes, int]:
        target = self._target(path)
        real = Path(os.path.realpath(target))
        if real != self._root and self._root not in real.parents:
            raise FileRefused(f"{path} is a symlink leading outside the sandbox")
        check_path(real.relative_to(self._root).as_posix())  # a link into .git is refused too
        try:
            fd = os.open(real, _READ_FLAGS)
        except OSError as exc:
            raise refusal(exc, path) from exc
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise FileRefused(f"{path} is a {kind_of(st.st_mode)}, not a regular file")
            data = handle.read() if limit is None else handle.read(limit)
        return data, max(st.st_size, len(data))

    def read_listed(
        self, paths: Iterable[str], limit: int
    ) -> Iterator[tuple[str, bytes | None, int]]:
        return read_listed(self._root, paths, limit)

    def listing(self, path: str | None, limit: int) -> tuple[list[Listed], bool]:
        top, base = (self._root, "") if path is None else (self._target(path), check_path(path))
        if path is not None and (kind := self._kind_at(top, path)) is not Kind.DIRECTORY:
            raise FileRefused(f"{path} is a {check_exists(path, kind)}, not a folder")
        found: list[Listed] = []
        folders = [(top, base)]
        while folders and len(found) <= limit:  # breadth first: a big tree shows its top
            folder, where = folders.pop(0)
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError as exc:
                raise refusal(exc, where or ".") from exc
            for entry in entries:
                if entry.name == ".git":  # git's metadata (a worktree's .git file too)
                    continue
                child = f"{where}/{entry.name}" if where else entry.name
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # removed while listed (a command still running)
                    continue
                kind = kind_of(st.st_mode)
                found.append(Listed(child, kind, st.st_size if kind is Kind.FILE else 0))
                if kind is Kind.DIRECTORY:
                    folders.append((Path(entry.path), child))
        return sorted(found[:limit]), len(found) > limit

    def write(self, path: str, data: bytes, mode: int | None) -> bool:
        """Write a new file next to the target, then rename it over the target.

        The rename replaces the directory entry, never the target's content in place: a file
        that is a hard link to something outside the sandbox is detached, not written through,
        and a failed write leaves the old content whole.
        """
        target = self._target(path)
        self._announce([check_path(path)])
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
            raise refusal(exc, path) from exc
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
            raise refusal(exc, path) from exc
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
                raise refusal(exc, path) from exc
            self._on_change()
        if not target.parent.is_dir():
            raise FileRefused(f"{path} has a parent that is not a folder")

    def delete(self, path: str) -> None:
        target = self._target(path)
        kind = self._kind_at(target, path)
        check_deletable(path, kind)
        self._announce([check_path(path)])
        try:
            os.unlink(target)
        except OSError as exc:
            raise refusal(exc, path) from exc
        self._on_change()

    def remove(self, path: str) -> Kind:
        target = self._target(path)
        kind = check_exists(path, self._kind_at(target, path))
        if kind is not Kind.DIRECTORY:
            self.delete(path)
            return kind
        self._refuse_nested_git(target, path)
        self._announce(None)
        try:
            remove_tree(target)
        except OSError as exc:
            self._on_change()  # part of the folder may be gone
            raise refusal(exc, path) from exc
        self._on_change()
        return kind

    def move(self, source: str, destination: str) -> Kind:
        source, destination = check_move(source, destination)
        old, new = self._target(source), self._target(destination)
        kind = check_exists(source, self._kind_at(old, source))
        if kind is Kind.OTHER:
            raise FileRefused(f"{source} is a special file; only files, symlinks and folders move")
        if self._kind_at(new, destination) is not Kind.MISSING:
            raise FileRefused(f"{destination} already exists (delete it first, or move elsewhere)")
        if kind is Kind.DIRECTORY:
            self._refuse_nested_git(old, source)
        for link, target in self._links(old, source):
            check_target(moved_path(link, source, destination), target)
        self._announce(None if kind is Kind.DIRECTORY else [source, destination])
        self._make_parents(new, destination)
        try:
            os.rename(old, new)
        except OSError as exc:
            raise refusal(exc, source) from exc
        self._on_change()
        return kind

    def make_dir(self, path: str, mode: int) -> bool:
        path = check_path(path)
        check_mode(path, mode, Kind.DIRECTORY)
        target = self._target(path)
        kind = self._kind_at(target, path)
        if folder_exists(path, kind):
            return False
        self._announce([path])
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
        if self._kind_at(link, path) is not Kind.MISSING:
            raise FileRefused(f"{path} already exists (delete it first)")
        self._announce([path])
        self._make_parents(link, path)
        with self._writer(path) as writer:
            writer.symlink(path, target)
        self._on_change()

    def chmod(self, path: str, mode: int) -> Kind:
        path = check_path(path)
        kind = check_exists(path, self.kind(path))
        check_mode(path, mode, kind)
        self._announce([path])
        with self._writer(path) as writer:
            writer.set_mode(path, mode)
        self._on_change()
        return kind

    def _writer(self, path: str) -> TreeWriter:
        """A writer that opens every folder on the way without following a symlink."""
        try:
            return TreeWriter(self._root, durable=False)
        except OSError as exc:
            raise refusal(exc, path) from exc

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
            raise refusal(exc, rel) from exc
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
