"""Browser logins: the cookie a valid token is exchanged for, and whose it is.

After the first load with ``?token=...`` the browser holds a random login id in an HttpOnly,
SameSite=Strict cookie, so later URLs carry no token and no other site's page can use it.
The server keeps only digests of the ids, in memory: a restart logs everyone out.
"""

from __future__ import annotations

import hashlib
import secrets

COOKIE = "agents_login"
MAX_LOGINS = 1024  # the oldest login is forgotten past this (its tab reconnects with the token)


def _key(login: str) -> str:
    return hashlib.sha256(login.encode("utf-8")).hexdigest()


class Logins:
    def __init__(self, limit: int = MAX_LOGINS) -> None:
        self._users: dict[str, str] = {}
        self._limit = limit

    def open(self, name: str | None) -> tuple[str, str]:
        """A new login for ``name`` (the shared token's logins get ``web:<8 hex>``):
        ``(cookie value, user name)``."""
        login = secrets.token_urlsafe(32)
        user = name or f"web:{secrets.token_hex(4)}"
        self._users[_key(login)] = user
        while len(self._users) > self._limit:
            del self._users[next(iter(self._users))]
        return login, user

    def user(self, login: str | None) -> str | None:
        return self._users.get(_key(login)) if login else None
