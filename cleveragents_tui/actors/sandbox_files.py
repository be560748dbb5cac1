"""File operations of the file tools, on a sandbox's workdir or through an overlay sandbox.

The path rules are in :mod:`~cleveragents_tui.actors.file_rules`; the operations on a
directory in :mod:`~cleveragents_tui.actors.workdir_files`, on an overlay in
:mod:`~cleveragents_tui.actors.overlay_files`.

``on_change`` is called as soon as something was changed (before a later step can fail),
and only then: the tools pass ``note_write`` of the plan's sandboxes. A sandbox that can use
them (:class:`~cleveragents_tui.sandbox.base.HandsOutPaths`: git_worktree) is told the paths
before each change, so its next checkpoint examines those alone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from cleveragents_tui.actors.file_rules import NEW_FOLDER_MODE, FileRefused, Kind, Listed
from cleveragents_tui.actors.overlay_files import OverlayFiles
from cleveragents_tui.actors.workdir_files import WorkdirFiles
from cleveragents_tui.sandbox.base import HandsOutPaths, Sandbox
from cleveragents_tui.sandbox.overlay import OverlaySandbox

__all__ = ["NEW_FOLDER_MODE", "FileRefused", "Kind", "Listed", "SandboxFiles", "files_of"]


class SandboxFiles(Protocol):
    """What the file tools need of a sandbox. Paths are checked with :func:`check_path`."""

    def kind(self, path: str) -> Kind: ...

    def read(self, path: str, limit: int | None) -> tuple[bytes, int]:
        """At most ``limit`` bytes of a regular file (all when None), and its full size."""
        ...

    def read_listed(
        self, paths: Iterable[str], limit: int
    ) -> Iterator[tuple[str, bytes | None, int]]:
        """Files that :meth:`listing` named, each with at most ``limit`` bytes and its size
        (None for the bytes: no longer a regular file): a search reads thousands."""
        ...

    def listing(self, path: str | None, limit: int) -> tuple[list[Listed], bool]:
        """The entries below folder ``path`` (None: the whole sandbox), parents first and
        sorted, git's metadata left out, symlinks listed and never followed: at most
        ``limit``, and whether there were more."""
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
    if isinstance(sandbox, HandsOutPaths):  # handed out per change, for the paths it names
        return WorkdirFiles(sandbox.hand_out(()), on_change, sandbox.hand_out)
    workdir = sandbox.workdir
    if workdir is None:
        return None
    return WorkdirFiles(workdir, on_change)
