"""The path rules of the file tools and what their refusals say, shared by both kinds of files.

Every path is checked first: :func:`check_path` (no ``..``, no absolute path, no NUL, no
backslash, no ``.git`` component, not the sandbox itself). The tree operations keep the sandbox
one its checkpoints can restore exactly: a symlink's target stays inside wherever the link sits
(:func:`check_target`), and modes keep the owner's access the sandbox needs (:func:`check_mode`).
"""

from __future__ import annotations

import errno
import posixpath
import stat
from enum import StrEnum
from typing import NamedTuple

from cleveragents_tui.sandbox.objectstore.names import check_link_target
from cleveragents_tui.sandbox.safety import UnsafeInputError, safe_relative_path

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


class Listed(NamedTuple):
    """One entry of a listing: its path from the sandbox's top, its kind, a file's size."""

    path: str
    kind: Kind
    size: int


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


def check_move(source: str, destination: str) -> tuple[str, str]:
    """The checked paths of a move; refused when ``destination`` is ``source`` or below it."""
    source, destination = check_path(source), check_path(destination)
    if destination == source or destination.startswith(source + "/"):
        raise FileRefused(f"cannot move {source} into itself ({destination})")
    return source, destination


def check_exists(path: str, kind: Kind) -> Kind:
    """``kind``, what is at ``path``; refused when nothing is."""
    if kind is Kind.MISSING:
        raise FileRefused(f"{path} does not exist")
    return kind


def check_deletable(path: str, kind: Kind) -> None:
    """local/delete-file removes files and symlinks only."""
    if check_exists(path, kind) is Kind.DIRECTORY:
        raise FileRefused(f"{path} is a folder; local/delete-file removes files only")


def folder_exists(path: str, kind: Kind) -> bool:
    """Whether make_dir has nothing to do; refused when something else is at ``path``."""
    if kind is Kind.DIRECTORY:
        return True
    if kind is not Kind.MISSING:
        raise FileRefused(f"{path} exists and is a {kind}, not a folder")
    return False


def refusal(exc: OSError, path: str) -> FileRefused:
    """The one line the agent gets for an OS error on ``path``."""
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


def kind_of(mode: int) -> Kind:
    """The kind of an ``lstat`` mode."""
    if stat.S_ISREG(mode):
        return Kind.FILE
    if stat.S_ISDIR(mode):
        return Kind.DIRECTORY
    if stat.S_ISLNK(mode):
        return Kind.SYMLINK
    return Kind.OTHER
