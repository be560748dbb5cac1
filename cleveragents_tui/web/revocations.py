"""Single shared-token logins ended by hand: ``agents serve --revoke web:3f9a12cd``.

A login made with the shared token has no line in a users file to delete: its name
(``web:`` and 8 hex digits, as the server's log shows it at ``login:``) is appended to this
account's revocation file instead. A running server re-reads the file when it changes —
at the next request and every 2 seconds — and ends that login and its open tabs; the
shared token and every other login keep working. The file lists names, no secret.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from cleveragents_tui.domain.errors import UserError

SHARED_LOGIN = re.compile(r"web:[0-9a-f]{8}")
FILE_NAME = "serve-revoked-logins"


def revocations_file() -> Path:
    """Where ``agents serve`` of this account looks: beside the default database."""
    from platformdirs import user_data_path

    return user_data_path("cleveragents", appauthor=False) / FILE_NAME


def is_shared_login(name: str) -> bool:
    return SHARED_LOGIN.fullmatch(name) is not None


def revoke_login(path: Path, name: str) -> None:
    """Append ``name`` (a shared-token login) to the revocation file, created private."""
    if not is_shared_login(name):
        raise UserError(
            f"{name!r} is not a shared-token login",
            "give the name the server's log shows after 'login:', e.g. web:3f9a12cd",
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(descriptor, "a", encoding="utf-8") as file:
            file.write(name + "\n")
    except OSError as exc:
        raise UserError(f"cannot write the revocation file {path}: {exc.strerror}") from exc


def read_revoked(path: Path) -> frozenset[str]:
    """The revoked login names (none while the file does not exist); lines that are not
    login names are ignored. Any other error reading it is raised (OSError)."""
    try:
        lines = path.read_text("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return frozenset()
    return frozenset(line.strip() for line in lines if is_shared_login(line.strip()))
