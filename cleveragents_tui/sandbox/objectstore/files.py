"""Small-file helpers of the filesystem_copy and overlay sandboxes.

Atomic (and optionally durable) JSON files, the filesystem clock behind the racy-ctime rule,
and reading files without following symbolic links.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
from pathlib import Path

from cleveragents_tui import failpoints
from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.safety import UnsafeInputError

CHUNK = 1 << 20
# What one read of a file asks for: a read allocates all it asks for, and most files are small.
STEP = 64 << 10
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, durable: bool) -> None:
    """Write ``path`` so readers see the old bytes or the new, never a mix."""
    failpoints.hit("fs.write", "file")
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def write_json(path: Path, value: object, *, durable: bool) -> None:
    write_atomic(path, json.dumps(value, sort_keys=True).encode(), durable=durable)


def read_json_object(path: Path) -> dict[str, object]:
    """A JSON object from ``path``; anything else is a damaged sandbox."""
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CheckpointMissingError(
            f"{path} cannot be read ({exc})", "the sandbox is damaged"
        ) from exc
    if not isinstance(value, dict):
        raise CheckpointMissingError(f"{path} is not a JSON object", "the sandbox is damaged")
    return value


def json_int(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise UnsafeInputError(f"{what} {value!r} is not an integer", "the sandbox is damaged")
    return value


def fs_now(stamp: Path) -> int:
    """The filesystem clock now: the time the kernel would stamp on a change made right now.

    Touching a file and reading its mtime gives the same coarse clock that stamps
    ``ctime``, so a file whose ctime is earlier than this value cannot change again without
    its ctime moving (the "racy git" rule; see :func:`is_clean`).
    """
    fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.utime(fd)
        return os.fstat(fd).st_mtime_ns
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, STEP):
        chunks.append(chunk)
    return b"".join(chunks)


def hash_fd(fd: int) -> str:
    """sha256 of what ``fd`` reads to its end, without storing it."""
    digest = hashlib.sha256()
    while chunk := os.read(fd, STEP):
        digest.update(chunk)
    return digest.hexdigest()


def open_regular(dir_fd: int, name: str) -> int:
    """Open a regular file for reading; a symlink, FIFO or device is refused, not followed."""
    fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise SandboxError(f"{name!r} is not a regular file", "remove it or replace it with a file")
    return fd
