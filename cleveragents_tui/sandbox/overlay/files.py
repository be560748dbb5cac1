"""The file operations tools use on the overlay sandbox, and what they see of a path.

Tools have no folder to work in (``workdir`` is None): they read and write through these
methods, each recorded in the top layer (see the package docstring).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from enum import StrEnum

from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.objectstore.names import (
    check_entry_path,
    check_link_target,
    join_path,
    split_path,
)
from cleveragents_tui.sandbox.objectstore.tree_writer import list_path, read_path
from cleveragents_tui.sandbox.objectstore.trees import DIRECTORY, FILE, SYMLINK
from cleveragents_tui.sandbox.overlay.core import OverlayCore, visible_name
from cleveragents_tui.sandbox.overlay.layers import GONE, SPECIAL, WHITEOUT, Node


class EntryKind(StrEnum):
    FILE = "file"
    DIRECTORY = "directory"
    SYMLINK = "symlink"
    OTHER = "other"


_KIND_NAMES = {
    FILE: EntryKind.FILE,
    DIRECTORY: EntryKind.DIRECTORY,
    SYMLINK: EntryKind.SYMLINK,
    SPECIAL: EntryKind.OTHER,
}


@dataclass(frozen=True, slots=True)
class OverlayEntry:
    """One path of the merged view, as tools see it."""

    path: str
    kind: EntryKind
    mode: int
    size: int


class OverlayFiles(OverlayCore):
    """The overlay sandbox's file operations (the merged view, read and written)."""

    def read_bytes(self, path: str) -> bytes:
        node = self._existing(path)
        if node.kind == DIRECTORY:
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
        if node.kind != FILE:
            raise SandboxError(f"{path!r} is not a regular file", "read the file it points to")
        return self._content(path, node)

    def write_bytes(self, path: str, data: bytes, mode: int | None = None) -> None:
        """Write a file, creating missing parent directories (0o755) like ``mkdir -p``.

        ``mode`` defaults to the existing file's mode, else 0o644.
        """
        self._alive()
        if mode is not None:
            _check_mode(mode)
        self._make_parents(path)
        node = self._find(path)
        if node is not None and node.kind != FILE:
            if node.kind == DIRECTORY:
                raise IsADirectoryError(errno.EISDIR, "is a directory", path)
            raise SandboxError(f"{path!r} is not a regular file", "delete it first")
        mode = mode if mode is not None else node.mode if node else 0o644
        self._put(path, Node(FILE, mode, len(data), self._store.put_bytes(data), False))

    def delete(self, path: str) -> None:
        """Delete a file, symlink or directory (with everything in it)."""
        self._existing(path)
        self._put(path, GONE)

    def exists(self, path: str) -> bool:
        self._alive()
        return self._find(path) is not None

    def stat(self, path: str) -> OverlayEntry | None:
        self._alive()
        node = self._find(path)
        return (
            None
            if node is None
            else OverlayEntry(path, _KIND_NAMES[node.kind], node.mode, node.size)
        )

    def make_dirs(self, path: str, mode: int = 0o755) -> None:
        """Create ``path`` and any missing parents (an existing directory is fine)."""
        _check_mode(mode)
        self._make_parents(path)
        node = self._find(path)
        if node is None:
            self._put(path, Node(DIRECTORY, mode, 0, "", False))
        elif node.kind != DIRECTORY:
            raise FileExistsError(errno.EEXIST, "exists and is not a directory", path)

    def chmod(self, path: str, mode: int) -> None:
        node = self._existing(path)
        mode = _check_mode(mode)
        if node.kind == FILE and not node.ref:  # copy up from the real directory
            data = read_path(self._real, path)
            node = node._replace(size=len(data), ref=self._store.put_bytes(data))
        elif node.kind not in (FILE, DIRECTORY):
            raise SandboxError(f"{path!r} is not a file or directory", "symlinks have no mode")
        self._put(path, node._replace(mode=mode))

    def symlink(self, path: str, target: str) -> None:
        """Create a symlink; its target must stay inside the sandbox."""
        self._alive()
        check_link_target(check_entry_path(path), target)
        self._make_parents(path)
        if self._find(path) is not None:
            raise FileExistsError(errno.EEXIST, "already exists", path)
        self._put(path, Node(SYMLINK, 0o777, len(target), target, False))

    def move(self, source: str, destination: str) -> None:
        """Rename a file, symlink or directory (with everything in it) to a new path.

        Recorded as what the merged view becomes: every moved entry at its new path (the
        directory on top opaque, a real file's content copied into the object store, since
        a record of a real file means "the real file at this same path"), then a whiteout at
        the old path, all in one append to the log. ``destination`` must not exist; missing
        parent directories are made. Links must stay inside from their new place.
        """
        self._alive()
        source, destination = check_entry_path(source), check_entry_path(destination)
        node = self._existing(source)
        if destination == source or destination.startswith(source + "/"):
            raise SandboxError(f"cannot move {source!r} into itself", "move it elsewhere")
        if self._find(destination) is not None:
            raise FileExistsError(errno.EEXIST, "already exists", destination)
        moved = [(source, node)]
        if node.kind == DIRECTORY:
            moved.extend((entry.path, self._existing(entry.path)) for entry in self.walk(source))
        records: list[tuple[str, Node]] = []
        for old, each in moved:
            new = destination + old[len(source) :]
            if each.kind == SPECIAL:
                raise SandboxError(f"{old!r} is a special file", "only files, links, folders move")
            if each.kind == FILE and not each.ref:
                data = read_path(self._real, old)
                each = each._replace(size=len(data), ref=self._store.put_bytes(data))
            elif each.kind == SYMLINK:
                check_link_target(new, each.ref)
            elif each.kind == DIRECTORY:
                each = each._replace(opaque=old == source)
            records.append((new, each))
        self._make_parents(destination)
        self._put_all([*records, (source, GONE)])

    def read_link(self, path: str) -> str:
        node = self._existing(path)
        if node.kind != SYMLINK:
            raise SandboxError(f"{path!r} is not a symlink", "use read_bytes")
        return node.ref

    def list_dir(self, path: str = "") -> list[str]:
        """The names in directory ``path`` ("" is the top), sorted."""
        self._alive()
        if path and self._existing(path).kind != DIRECTORY:
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", path)
        names: set[str] = set()
        if not self._hidden(path, self._view, including=True):
            for name in list_path(self._real, path):
                if visible_name(join_path(path, name)):
                    names.add(name)
        for child, node in self._view.items():
            parent, name = split_path(child)
            if parent == path:
                (names.discard if node.kind == WHITEOUT else names.add)(name)
        return sorted(names)

    def walk(self, path: str = "") -> list[OverlayEntry]:
        """Every entry below ``path`` in the merged view, parents first, sorted."""
        out: list[OverlayEntry] = []
        for name in self.list_dir(path):
            child = join_path(path, name)
            node = self._existing(child)
            out.append(OverlayEntry(child, _KIND_NAMES[node.kind], node.mode, node.size))
            if node.kind == DIRECTORY:
                out.extend(self.walk(child))
        return out


def _check_mode(mode: int) -> int:
    if not 0 <= mode <= 0o777:
        raise SandboxError(f"mode {mode:o} is not allowed", "use permission bits only (0-0o777)")
    return mode
