"""Who may open the app: the server's shared token and the users file's per-user tokens.

Tokens are kept as SHA-256 digests only and compared in constant time against every entry
(no early exit), so neither a leaked users file nor response timing gives a token away.
The users file holds one ``NAME sha256:HEX`` line per person; ``#`` starts a comment.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from cleveragents_tui.domain.errors import UserError

TOKEN_ENV = "AGENTS_SERVE_TOKEN"  # noqa: S105 - the variable's name, not a token
MIN_TOKEN_LENGTH = 16
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9._~-]+")  # URL-safe: it travels in a query string
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")  # no ':' ("web:" is ours)
_LINE = re.compile(r"(?P<name>\S+)\s+sha256:(?P<digest>[0-9a-f]{64})")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def check_token(token: str) -> str:
    """A token given by the user: long enough and URL-safe."""
    if not TOKEN_PATTERN.fullmatch(token):
        raise UserError(
            "the server token may use only letters, digits and . _ ~ -",
            'generate one: python -c "import secrets; print(secrets.token_urlsafe())"',
        )
    if len(token) < MIN_TOKEN_LENGTH:
        raise UserError(
            f"the server token is too short ({len(token)} characters, at least {MIN_TOKEN_LENGTH})",
            'generate one: python -c "import secrets; print(secrets.token_urlsafe())"',
        )
    return token


def check_name(name: str) -> str:
    if not NAME_PATTERN.fullmatch(name):
        raise UserError(
            f"user name {name!r} is not allowed",
            "use 1-64 letters, digits and . _ @ + - (starting with a letter or digit)",
        )
    return name


@dataclass(frozen=True)
class Credentials:
    """``entries`` pairs a token digest with the user's name; ``None`` names the shared
    server token, whose sessions are named by the login (``web:<id>``)."""

    entries: tuple[tuple[bytes, str | None], ...]

    def identify(self, token: str) -> tuple[bool, str | None]:
        """``(known, name)``: every entry is compared, also after a match (no early exit)."""
        presented = digest(token)
        known, name = False, None
        for stored, owner in self.entries:
            if hmac.compare_digest(presented, stored):
                known, name = True, owner
        return known, name


def read_users(path: Path) -> tuple[tuple[bytes, str], ...]:
    """The users file, checked line by line (duplicate names or tokens are refused)."""
    try:
        lines = path.read_text("utf-8").splitlines()
    except OSError as exc:
        raise UserError(
            f"cannot read the users file {path}: {exc.strerror}",
            "check the --users path (create it with --add-user NAME)",
        ) from exc
    users: list[tuple[bytes, str]] = []
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise UserError(
                f"{path}:{number} is not a 'NAME sha256:HEX' line",
                "fix the line, or add users with agents serve --users FILE --add-user NAME",
            )
        name, stored = check_name(match["name"]), bytes.fromhex(match["digest"])
        if any(name == n or stored == d for d, n in users):
            raise UserError(
                f"{path}:{number} repeats a user name or token", "keep one line per user"
            )
        users.append((stored, name))
    return tuple(users)


def add_user(path: Path, name: str) -> str:
    """Append ``name`` with a new token to the users file (created private, mode 0600) and
    return the token: it is shown once and stored only as its digest."""
    check_name(name)
    if path.exists() and any(n == name for _, n in read_users(path)):
        raise UserError(f"{name} is already in {path}", "choose another name or edit the file")
    token = new_token()
    line = f"{name} sha256:{digest(token).hex()}\n"
    existing = path.read_bytes() if path.exists() else b""
    if existing and not existing.endswith(b"\n"):
        line = "\n" + line
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(descriptor, "a", encoding="utf-8") as file:
            file.write(line)
    except OSError as exc:
        raise UserError(f"cannot write the users file {path}: {exc.strerror}") from exc
    return token


def remove_user(path: Path, name: str) -> None:
    """Delete ``name``'s line from the users file (comments and other lines kept), by
    writing a private copy and renaming it over the file: a running server sees the change
    at once and ends that user's logins and tabs."""
    check_name(name)
    if not any(n == name for _, n in read_users(path)):
        raise UserError(f"{name} is not in {path}", "check the name (the file lists one per line)")
    kept = [
        raw
        for raw in path.read_text("utf-8").splitlines(keepends=True)
        if raw.split("#", 1)[0].split()[:1] != [name]
    ]
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write("".join(kept))
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UserError(f"cannot write the users file {path}: {exc.strerror}") from exc
