"""What may be stored by name in a filesystem_copy or overlay sandbox, and how names join.

Object ids, checkpoint references, tree entry names, relative paths and symlink targets are
read back from disk, where a tool or a damaged file may have put anything: every one goes
through a check here before it is used (DESIGN.md section 8).
"""

from __future__ import annotations

import os
import re
import secrets

from cleveragents_tui.sandbox.base import CheckpointMissingError
from cleveragents_tui.sandbox.safety import (
    NAME_MAX,
    UnsafeInputError,
    check_component,
    safe_relative_path,
)

_OID = re.compile(r"^[0-9a-f]{64}$")
_REF = re.compile(r"^[0-9]{6}-[0-9a-f]{8}$")
_MAX_LINK = 4096
MAX_DEPTH = 256
_NOT_A_NAME = frozenset(("", ".", ".."))


def check_oid(value: object) -> str:
    """A full lowercase sha256 hex digest; anything else in a manifest is refused."""
    if not isinstance(value, str) or not _OID.match(value):
        raise UnsafeInputError(f"{value!r} is not an object id", "object ids are 64 hex digits")
    return value


def check_ref(value: str) -> str:
    """A checkpoint reference as these strategies make them: ``NNNNNN-xxxxxxxx``."""
    if not isinstance(value, str) or not _REF.match(value):
        raise CheckpointMissingError(
            f"{value!r} is not a checkpoint reference of this sandbox",
            "use a reference returned by checkpoint()",
        )
    return value


def new_ref(seq: int) -> str:
    """A fresh reference: a sequence number for order, random hex so a reused number differs."""
    return f"{seq:06d}-{secrets.token_hex(4)}"


def ref_seq(ref: str) -> int:
    return int(check_ref(ref)[:6])


def check_name(name: object, *, top: bool) -> str:
    """One path component read from a tree object.

    Joined under parents that passed this check, a deeper name gives a path that
    :func:`safe_relative_path` accepts exactly when the name is non-empty and has no ``/``,
    NUL or backslash, is not ``.`` or ``..`` and passes :func:`check_component` (encodable,
    at most 255 bytes); its ``.git`` and ``~`` rules concern the first component only, so
    top-level names go through it directly.
    """
    if (
        type(name) is not str
        or name in ("", ".", "..")
        or "/" in name
        or "\\" in name
        or "\x00" in name
    ):
        raise UnsafeInputError(f"name {name!r} is not allowed in a tree", "use a plain file name")
    check_component(name)
    if top:
        safe_relative_path(name)
    return name


def check_entry_path(raw: str) -> str:
    """A canonical relative path: :func:`safe_relative_path`, and no ``.``, ``//`` or trailing ``/``.

    Canonical form matters because two spellings of one path would be two entries.
    """
    if type(raw) is str and _plainly_canonical(raw):
        return raw  # what follows accepts it too, at a tenth of the cost (every file write)
    path = safe_relative_path(raw)
    if str(path) != raw or "." in raw.split("/"):
        raise UnsafeInputError(f"path {raw!r} is not canonical", "write it as 'dir/file'")
    return raw


def _plainly_canonical(raw: str) -> bool:
    """What the full check of :func:`check_entry_path` accepts, tested without parsing; a
    non-str (a damaged record's JSON) goes the full way, which refuses it as before."""
    parts = raw.split("/")
    return (
        raw[:1] not in ("", "~")
        and "\x00" not in raw
        and "\\" not in raw
        and parts[0] != ".git"
        and all(part not in _NOT_A_NAME and _fits(part) for part in parts)
    )


def _fits(part: str) -> bool:
    """What :func:`check_component` accepts, without raising."""
    try:
        return len(os.fsencode(part)) <= NAME_MAX
    except UnicodeError:
        return False


def check_link_target(link: str, target: object) -> str:
    """A symlink target that stays inside the tree wherever the link sits.

    Allowed: a relative target whose ``..`` components all come first and climb no higher
    than the link's own directory. Its parents are real directories, so climbing reaches a
    directory inside; the names after it each step into a directory inside or through
    another link that, by the same rule, lands inside. ``a/..`` after a link named ``a``
    could escape, which is why ``..`` after a name is refused.
    """
    if (
        not isinstance(target, str)
        or not target
        or "\x00" in target
        or target.startswith("/")
        or len(target) > _MAX_LINK
    ):
        raise UnsafeInputError(
            f"symlink {link!r} -> {target!r} points outside the sandbox", "use a relative target"
        )
    climbs = 0
    named = False
    for part in target.split("/"):
        if part == "..":
            if named:
                raise UnsafeInputError(
                    f"symlink {link!r} -> {target!r} uses '..' after a name",
                    "write the target without going back up",
                )
            climbs += 1
        elif part not in ("", "."):
            named = True
    if climbs > link.count("/"):
        raise UnsafeInputError(
            f"symlink {link!r} -> {target!r} points outside the sandbox",
            "point it at a path inside the sandbox",
        )
    return target


def split_path(rel: str) -> tuple[str, str]:
    """``'a/b/c'`` → ``('a/b', 'c')``; ``'c'`` → ``('', 'c')``."""
    parent, _, name = rel.rpartition("/")
    return parent, name


def join_path(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name
