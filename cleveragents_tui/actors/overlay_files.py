"""File operations of an overlay sandbox, through its own checked file operations (no workdir)."""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Callable, Iterable, Iterator
from pathlib import PurePosixPath

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
    moved_path,
    refusal,
)
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.overlay import EntryKind, OverlaySandbox

_MAX_LINKS = 16


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
        kind = check_exists(path, self.kind(real))
        if kind is not Kind.FILE:
            raise FileRefused(f"{path} is a {kind}, not a regular file")
        data = self._sandbox.read_bytes(real)
        return (data if limit is None else data[:limit]), len(data)

    def read_listed(
        self, paths: Iterable[str], limit: int
    ) -> Iterator[tuple[str, bytes | None, int]]:
        for path in paths:  # an overlay's own reads: no path of a workdir is resolved
            try:
                data, size = self.read(path, limit)
            except (FileRefused, UserError):  # removed since listed, or a name refused
                yield path, None, 0
            else:
                yield path, data, size

    def listing(self, path: str | None, limit: int) -> tuple[list[Listed], bool]:
        where = "" if path is None else check_path(path)
        if path is not None and (kind := self.kind(where)) is not Kind.DIRECTORY:
            raise FileRefused(f"{path} is a {check_exists(path, kind)}, not a folder")
        # the walk goes depth first; the cap keeps the top levels, as a workdir's listing does
        entries = sorted(self._sandbox.walk(where), key=lambda e: e.path.count("/"))
        listed = [
            Listed(e.path, _OVERLAY_KINDS[e.kind], e.size if e.kind is EntryKind.FILE else 0)
            for e in entries[:limit]
        ]
        return sorted(listed), len(entries) > limit

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
            raise refusal(exc, path) from exc
        self._on_change()
        return created

    def delete(self, path: str) -> None:
        path = check_path(path)
        kind = self.kind(path)
        check_deletable(path, kind)
        self._sandbox.delete(path)
        self._on_change()

    def remove(self, path: str) -> Kind:
        path = check_path(path)
        kind = check_exists(path, self.kind(path))
        if kind is Kind.DIRECTORY:
            self._refuse_nested_git(path)
        self._sandbox.delete(path)
        self._on_change()
        return kind

    def move(self, source: str, destination: str) -> Kind:
        source, destination = check_move(source, destination)
        kind = check_exists(source, self.kind(source))
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
        if folder_exists(path, kind):
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
        kind = check_exists(path, self.kind(path))
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
        return refusal(exc, path)
    return FileRefused(f"{path}: {exc}")
