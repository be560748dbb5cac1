"""Validation of everything that crosses into a path, a git command or an SQL identifier.

Text from users, agents, archives and manifests goes through here first (DESIGN.md section 8).
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path, PurePosixPath

from cleveragents_tui.domain.errors import UserError


class UnsafeInputError(UserError):
    """A path, ref, SHA or identifier that could escape the sandbox or be read as an option."""


_SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_SAVEPOINT = re.compile(r"^sp_[0-9a-f]{16,32}$")
_REF_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
NAME_MAX = 255  # bytes in one path component (Linux, macOS, Windows: at most this)


def check_component(name: str) -> str:
    """One path component the filesystem can hold: encodable, at most :data:`NAME_MAX` bytes.

    Anything else would fail in the middle of a write (``ENAMETOOLONG``, a lone surrogate
    that cannot be encoded) instead of being refused before the first one.
    """
    try:
        encoded = os.fsencode(name)
    except UnicodeError:
        raise UnsafeInputError(
            f"name {name!r} cannot be a file name", "use a name of valid characters"
        ) from None
    if len(encoded) > NAME_MAX:
        raise UnsafeInputError(
            f"name {name[:40]!r}... is longer than {NAME_MAX} bytes", "use a shorter name"
        )
    return name


def safe_relative_path(raw: str) -> PurePosixPath:
    """A relative POSIX path with no ``..``, no absolute root, no NUL, no backslash tricks."""
    if not raw or "\x00" in raw or "\\" in raw:
        raise UnsafeInputError(
            f"path {raw!r} is not allowed", "use a relative path with '/' separators"
        )
    path = PurePosixPath(raw)
    if path.is_absolute() or any(part in ("..", "") for part in path.parts) or raw.startswith("~"):
        raise UnsafeInputError(f"path {raw!r} leaves the sandbox", "use a path inside the sandbox")
    if path.parts and path.parts[0] == ".git":
        raise UnsafeInputError(
            f"path {raw!r} points into git's own metadata", "use a working-tree path"
        )
    for part in path.parts:
        check_component(part)
    return path


def resolve_inside(root: Path, raw: str) -> Path:
    """``root / raw`` after checking that no symlink on the way leads outside ``root``."""
    relative = safe_relative_path(raw)
    base = root.resolve()
    target = base.joinpath(*relative.parts)
    parent = target.parent.resolve()
    if parent != base and base not in parent.parents:
        raise UnsafeInputError(f"path {raw!r} resolves outside the sandbox", "remove the symlink")
    return target


def check_sha(value: str) -> str:
    """A full hex object id (SHA-1 or SHA-256), never an abbreviation, ref name or option."""
    if not _SHA.fullmatch(value):
        raise UnsafeInputError(f"{value!r} is not a full git object id", "use the 40-character SHA")
    return value


def check_ref_name(value: str) -> str:
    """A git ref under ``refs/`` built only of safe parts (no option, no ``..``, no ``@{``)."""
    parts = value.split("/")
    if len(parts) < 2 or parts[0] != "refs" or not all(_REF_PART.fullmatch(p) for p in parts[1:]):
        raise UnsafeInputError(
            f"{value!r} is not a ref name this tool creates", "use refs/cleveragents/..."
        )
    if any(p.endswith((".lock", ".")) for p in parts) or ".." in value:
        raise UnsafeInputError(f"{value!r} is not a valid ref name", "use refs/cleveragents/...")
    return value


def new_savepoint_name() -> str:
    return f"sp_{secrets.token_hex(8)}"


def check_savepoint_name(value: str) -> str:
    """Savepoint names are SQL identifiers, never parameters: only ``sp_<hex>`` is accepted."""
    if not _SAVEPOINT.fullmatch(value):
        raise UnsafeInputError(
            f"{value!r} is not a savepoint name this tool creates", "use sp_<hex>"
        )
    return value
