"""Reading many files of a workdir that its own listing named (``local/search-files``).

A read of one path an agent gave resolves it (``realpath``, each folder on the way) and
checks where it lands, which is most of the cost when thousands of files are read. The
files a listing named need no resolving: each is opened folder by folder from the sandbox's
root, with ``O_NOFOLLOW`` at every step, so nothing is followed at all — a folder swapped
for a symlink since the listing fails to open, it is never read through. The open folders
of the last path are kept for the next (a listing's paths come sorted, siblings together).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Final

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NOT_A_NAME: Final = frozenset({"", ".", "..", ".git"})  # never a step of a listed path


def read_listed(
    root: Path, paths: Iterable[str], limit: int
) -> Iterator[tuple[str, bytes | None, int]]:
    """Each of ``paths`` (relative, ``/``-separated) with at most ``limit`` bytes of it and
    its size; None instead of the bytes when it cannot be read as a regular file (removed,
    replaced by a folder, a link or a special file since it was listed)."""
    folders = _OpenFolders(root)
    try:
        for path in paths:
            yield path, *_read(folders, path, limit)
    finally:
        folders.close()


def _read(folders: _OpenFolders, path: str, limit: int) -> tuple[bytes | None, int]:
    *steps, name = path.split("/")
    if name in _NOT_A_NAME:
        return None, 0
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=folders.at(steps))
    except OSError:
        return None, 0
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, 0
        data = handle.read(limit)
    return data, max(st.st_size, len(data))


class _OpenFolders:
    """The open folders from the root down to the last path's folder."""

    def __init__(self, root: Path) -> None:
        self._names: list[str] = []
        self._fds = [os.open(root, _DIR_FLAGS)]

    def at(self, steps: list[str]) -> int:
        """An open descriptor of the folder ``steps`` below the root (OSError if one of
        them is no longer a folder, or a link)."""
        shared = 0
        while shared < min(len(steps), len(self._names)) and steps[shared] == self._names[shared]:
            shared += 1
        while len(self._names) > shared:
            self._names.pop()
            os.close(self._fds.pop())
        for step in steps[shared:]:
            if step in _NOT_A_NAME:
                raise OSError(f"{step!r} is not a folder's name here")
            self._fds.append(os.open(step, _DIR_FLAGS, dir_fd=self._fds[-1]))
            self._names.append(step)
        return self._fds[-1]

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()
