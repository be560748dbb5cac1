"""The statement log: every statement a tool ran, so a later process can replay it.

``statements.jsonl`` (mode 0600) holds one JSON object per line; the format and the replay
rules are in docs/sandboxes.md, "The savepoint sandbox".
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from sqlalchemy.engine import CursorResult
from sqlalchemy.sql import Select
from sqlalchemy.sql.base import Executable

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.sandbox.safety import check_savepoint_name
from cleveragents_tui.sandbox.transaction.core import SandboxCore
from cleveragents_tui.sandbox.transaction.state import write_all, write_private

log = logging.getLogger(__name__)

LOG_FILE_NAME: Final = "statements.jsonl"
# A statement that only reads on SQLite (which has no functions that write): not logged.
_SQLITE_READ = re.compile(
    r"^\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*SELECT\b", re.IGNORECASE | re.DOTALL
)


def append_private(path: Path, data: bytes) -> None:
    """Append and fsync. Never creates the file: a log deleted meanwhile must not restart."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def log_line(entry: Mapping[str, Any]) -> bytes:
    return (json.dumps(entry, allow_nan=False) + "\n").encode("ascii")


def read_log(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The log's entries, and why it cannot be replayed (None when it can).

    A last line without its newline is a write cut short by the process ending before
    ``execute`` or ``checkpoint`` returned: it is left out.
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return [], f"there is no statement log {path}"
    except OSError as exc:
        return [], f"cannot read the statement log {path}: {exc}"
    lines = raw.split(b"\n")
    if lines[-1]:
        log.warning("ignoring an incomplete last line of %s", path)
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, line in enumerate(lines[:-1], start=1):
        try:
            entry = json.loads(line)
            if not isinstance(entry, dict):
                raise TypeError("not an object")
            if "savepoint" in entry:
                name = check_savepoint_name(str(entry["savepoint"]))
                if name in seen:
                    raise ValueError(f"savepoint {name} appears twice")
                seen.add(name)
            elif "unreplayable" in entry:
                return [], str(entry["unreplayable"])
            elif "failed" in entry:
                if not isinstance(entry["failed"], str) or entry["after"] != len(seen) - 1:
                    raise ValueError("unexpected fields")
            else:
                params = entry["params"]
                if (
                    not isinstance(entry["sql"], str)
                    or entry["after"] != len(seen) - 1
                    or not (
                        params is None
                        or isinstance(params, dict)
                        or (isinstance(params, list) and all(isinstance(p, dict) for p in params))
                    )
                    or not isinstance(entry.get("rowcount", 0), int)
                ):
                    raise ValueError("unexpected fields")
                _logged_bytes(entry)
            entries.append(entry)
        except (ValueError, KeyError, TypeError, UserError) as exc:
            return [], f"line {number} of the statement log {path} is damaged ({exc})"
    return entries, None


def _logged_bytes(entry: Mapping[str, Any]) -> list[str]:
    """The names a statement entry logs as base64 bytes (checked: text values it has)."""
    names = entry.get("bytes", [])
    params = entry["params"]
    if not isinstance(names, list) or (names and not isinstance(params, dict)):
        raise ValueError("unexpected bytes field")
    for name in names:
        if not isinstance(name, str) or not isinstance(params.get(name), str):
            raise ValueError(f"bytes parameter {name!r} is not logged as text")
    return names


def logged_params(entry: Mapping[str, Any]) -> Any:
    """A logged statement's parameters as they were run: base64-logged bytes decoded."""
    names = _logged_bytes(entry)
    if not names:
        return entry["params"]
    params = dict(entry["params"])
    for name in names:
        params[name] = base64.b64decode(params[name], validate=True)
    return params


class LoggedSandbox(SandboxCore):
    """The sandbox's statement log: appended by each statement and checkpoint, cut back by
    a rollback, and marked unreplayable when it stops describing the transaction."""

    @property
    def _log_path(self) -> Path:
        return self._root / LOG_FILE_NAME

    @property
    def unreplayable_reason(self) -> str | None:
        """None while a later process can replay the statement log, else why it cannot."""
        if self._log_broken is not None:
            return self._log_broken
        for entry in self._entries:
            if "unreplayable" in entry:
                return str(entry["unreplayable"])
        return None

    def _append(self, entry: dict[str, Any]) -> None:
        if self._log_broken is not None:
            return
        self._entries.append(entry)
        try:
            append_private(self._log_path, log_line(entry))
        except OSError as exc:
            self._break_log(f"writing the statement log {self._log_path} failed: {exc}")

    def _log_statement(
        self,
        sql: str | Executable,
        params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None,
        result: CursorResult[Any],
    ) -> None:
        """Append a statement that succeeded, or say where the log stops being replayable."""
        after = len(self._stack) - 1
        if not isinstance(sql, str):
            if self.dialect == "sqlite" and isinstance(sql, Select):
                return
            self._append(
                {
                    "unreplayable": f"a {type(sql).__name__} object was run instead of SQL "
                    "text, and only SQL text is logged",
                    "after": after,
                }
            )
            return
        if self.dialect == "sqlite" and _SQLITE_READ.match(sql):
            return
        plain: object
        if params is None:
            plain = None
        elif isinstance(params, Mapping):
            plain = dict(params)
        else:
            plain = [dict(each) for each in params]
        entry: dict[str, Any] = {"sql": sql, "params": plain, "after": after}
        if isinstance(plain, dict):
            binary = sorted(k for k, v in plain.items() if isinstance(v, bytes | bytearray))
            if binary:  # BLOB values (local/run-sql's blobs): base64 text, decoded on replay
                for key in binary:
                    plain[key] = base64.b64encode(bytes(plain[key])).decode("ascii")
                entry["bytes"] = binary
        if not result.returns_rows and result.rowcount >= 0:
            entry["rowcount"] = result.rowcount
        try:
            exact = json.loads(log_line(entry)) == entry
        except (TypeError, ValueError):
            exact = False
        if not exact:
            first = sql.strip()[:80]
            entry = {
                "unreplayable": f"statement {first!r} had parameter values that JSON cannot "
                "carry exactly (only strings, numbers, booleans, None, lists and mappings "
                "are logged)",
                "after": after,
            }
        self._append(entry)

    def _truncate_log(self, ref: str) -> None:
        """Cut the log back to savepoint ``ref`` (kept): a new file, then rename."""
        if self._log_broken is not None:
            return
        marks = [i for i, entry in enumerate(self._entries) if entry.get("savepoint") == ref]
        if not marks:
            self._break_log(f"savepoint {ref} is missing from the statement log")
            return
        del self._entries[marks[0] + 1 :]
        try:
            if not self._log_path.is_file():
                raise FileNotFoundError(f"{self._log_path} was removed")
            write_private(self._log_path, b"".join(log_line(e) for e in self._entries))
        except OSError as exc:
            self._break_log(f"rewriting the statement log {self._log_path} failed: {exc}")
