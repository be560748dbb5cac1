"""Comparing two versions of a resource's files (rows): the path shown safely, the
:class:`FileDiff` / :class:`ResourceDiff` kept with a correction, text or a one-line summary
within size limits (docs/corrections.md, "Diffs")."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.sandbox.base import Change, ChangeKind, Sandbox

# A side larger than this is summarised, not kept: the report lives in the database.
TEXT_LIMIT = 1_000_000


# The text one correction keeps in all; past it, the other files are listed, not read.
TOTAL_LIMIT = 20_000_000


# What git calls binary: a NUL in the first 8000 bytes.
_BINARY_PROBE = 8000


# A file name is shown quoted when it holds any of: a control (a line break, a tab, ESC), a
# bidirectional override, a quote, a backslash, or a byte that is not UTF-8 (PEP 383 decodes
# it as a lone surrogate).
_QUOTED = re.compile(r'[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"\\\udc80-\udcff]')


_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def shown_path(path: str) -> str:
    """A file name (or a row's ``table/key``) as one printable line: as it is when it is
    plain, else quoted with C escapes as git shows it — ``"odd\\nname.txt"``, ``"\\xff.txt"``
    for a byte that is not UTF-8 — so no name breaks a diff's lines, reaches the terminal as
    a control, or looks like another."""
    if not _QUOTED.search(path):
        return path

    def escaped(found: re.Match[str]) -> str:
        char, code = found[0], ord(found[0])
        if char in _NAMED:
            return _NAMED[char]
        if 0xDC80 <= code <= 0xDCFF:  # the byte a surrogate stands for
            return f"\\x{code - 0xDC00:02x}"
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    return '"' + _QUOTED.sub(escaped, path) + '"'


def readable_path(path: str) -> str:
    """The name as valid Unicode (a byte that is not UTF-8 as U+FFFD), for JSON and the
    store, which hold text only; :func:`path_bytes` gives the exact name then."""
    return os.fsencode(path).decode("utf-8", errors="replace")


def path_json(path: str) -> dict[str, str]:
    """A file name in a JSON document: ``path`` as valid Unicode, and ``path_bytes`` (hex)
    when the name is not UTF-8 (the exact name)."""
    raw = path_bytes(path)
    return {"path": readable_path(path), **({"path_bytes": raw} if raw else {})}


def path_bytes(path: str) -> str | None:
    """The name's bytes in hex when they are not UTF-8 (else None: the text is exact)."""
    raw = os.fsencode(path)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.hex()
    return None


@dataclass(frozen=True)
class FileDiff:
    """One changed file (or row): its text on each side (None where it is absent), or, for
    a binary or very large file, a summary instead of its contents."""

    change: Change
    old: str | None
    new: str | None
    summary: str | None = None


@dataclass(frozen=True)
class ResourceDiff:
    resource_id: str
    old_ref: str
    new_ref: str
    files: list[FileDiff] = field(default_factory=list)
    note: str | None = None


@dataclass
class Budget:
    """The text a correction may still keep (bytes)."""

    left: int


def compare(
    sandbox: Sandbox, resource_id: str, old_ref: str, new_ref: str, budget: Budget
) -> ResourceDiff:
    try:
        files = [
            _file(sandbox, c, old_ref, new_ref, budget) for c in sandbox.diff(old_ref, new_ref)
        ]
    except UserError as exc:
        return ResourceDiff(resource_id, old_ref, new_ref, note=str(exc))
    return ResourceDiff(resource_id, old_ref, new_ref, files)


def _file(sandbox: Sandbox, change: Change, old_ref: str, new_ref: str, budget: Budget) -> FileDiff:
    if budget.left <= 0:
        kept = f"contents not kept: the diff already holds {TOTAL_LIMIT:,} bytes of text"
        return FileDiff(change, None, None, kept)
    try:
        old, new = sandbox.read(old_ref, change.path), sandbox.read(new_ref, change.path)
    except UserError as exc:  # this file only: the resource's other files are still shown
        return FileDiff(change, None, None, f"contents not read: {exc}")
    if is_binary(old) or is_binary(new):
        return FileDiff(change, None, None, f"binary file: contents not shown ({_sizes(old, new)})")
    if len(old or b"") > TEXT_LIMIT or len(new or b"") > TEXT_LIMIT:
        return FileDiff(change, None, None, f"large file: contents not shown ({_sizes(old, new)})")
    budget.left -= len(old or b"") + len(new or b"")
    return FileDiff(change, decoded(old), decoded(new))


def is_binary(data: bytes | None) -> bool:
    return data is not None and b"\0" in data[:_BINARY_PROBE]


def decoded(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", errors="replace")


def _sizes(old: bytes | None, new: bytes | None) -> str:
    def size(data: bytes | None) -> str:
        return "absent" if data is None else f"{len(data):,} bytes"

    return f"{size(old)} → {size(new)}"


def stored(diff: ResourceDiff) -> dict[str, Any]:
    return {
        "resource_id": diff.resource_id,
        "old_ref": diff.old_ref,
        "new_ref": diff.new_ref,
        "note": diff.note,
        "files": [
            {
                "path": readable_path(f.change.path),
                "path_bytes": path_bytes(f.change.path),
                "kind": f.change.kind.value,
                "old": f.old,
                "new": f.new,
                "summary": f.summary,
            }
            for f in diff.files
        ],
    }


def loaded(entries: object) -> list[ResourceDiff]:
    if not isinstance(entries, list):
        return []
    return [
        ResourceDiff(
            str(e["resource_id"]),
            str(e.get("old_ref") or ""),
            str(e.get("new_ref") or ""),
            [
                FileDiff(
                    Change(path_of(f), ChangeKind(f["kind"])),
                    f.get("old"),
                    f.get("new"),
                    f.get("summary"),
                )
                for f in e.get("files", [])
            ],
            e.get("note"),
        )
        for e in entries
        if isinstance(e, dict)
    ]


def path_of(stored: dict[str, Any]) -> str:
    """A stored file's name: exact from its bytes when they are not UTF-8."""
    raw = stored.get("path_bytes")
    return os.fsdecode(bytes.fromhex(raw)) if isinstance(raw, str) else str(stored["path"])
