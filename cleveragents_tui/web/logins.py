"""Browser logins: the cookie a valid token is exchanged for, and whose it is.

After the first load with ``?token=...`` the browser holds a random login id in an HttpOnly,
SameSite=Lax cookie. The cookie's name is this server's own (derived from its public URL):
a host-only cookie goes to every port of the host, so two servers on one host must not
share a name, and no server takes another's login. Each login is bound to the address it
was made from (a copied cookie sent from elsewhere is refused, whatever Origin it forges),
ends after an idle time and after an absolute lifetime, and ends when its user is revoked.
The server keeps only digests of the ids, in memory: a restart logs everyone out.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable, Container
from dataclasses import dataclass

COOKIE_PREFIX = "agents_login_"
MAX_LOGINS = 1024  # the oldest login is forgotten past this (its tab reconnects with the token)
DEFAULT_IDLE_HOURS = 8.0
DEFAULT_LIFETIME_HOURS = 168.0  # a week


def cookie_name(public_url: str) -> str:
    """``agents_login_`` and 12 hex digits of the public URL: one name per server."""
    return COOKIE_PREFIX + hashlib.sha256(public_url.encode("utf-8")).hexdigest()[:12]


def login_key(login: str) -> str:
    return hashlib.sha256(login.encode("utf-8")).hexdigest()


@dataclass
class Login:
    user: str
    remote: str | None
    opened: float
    used: float


class Logins:
    """The open logins, by the digest of their cookie value. ``clock`` is monotonic
    seconds; ``in_use`` (the keys of logins with an open tab) are never idle."""

    def __init__(
        self,
        *,
        idle: float = DEFAULT_IDLE_HOURS * 3600,
        lifetime: float = DEFAULT_LIFETIME_HOURS * 3600,
        limit: int = MAX_LOGINS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logins: dict[str, Login] = {}
        self.idle, self.lifetime, self._limit, self.clock = idle, lifetime, limit, clock

    def open(self, name: str | None, remote: str | None) -> tuple[str, str]:
        """A new login for ``name`` (the shared token's logins get ``web:<8 hex>``) from
        ``remote``: ``(cookie value, user name)``."""
        login = secrets.token_urlsafe(32)
        user = name or f"web:{secrets.token_hex(4)}"
        now = self.clock()
        self._logins[login_key(login)] = Login(user, remote, now, now)
        while len(self._logins) > self._limit:
            del self._logins[next(iter(self._logins))]
        return login, user

    def user(self, login: str | None, remote: str | None) -> tuple[str, str] | None:
        """``(key, user)`` of a live login presented from the address it was made from; the
        login counts as used now. Expired logins are forgotten."""
        if not login:
            return None
        key = login_key(login)
        found = self._logins.get(key)
        if found is None or found.remote != remote or not self.alive(key):
            return None
        found.used = self.clock()
        return key, found.user

    def alive(self, key: str, in_use: Container[str] = ()) -> bool:
        """Within its lifetime and (unless a tab of it is open) its idle time."""
        found = self._logins.get(key)
        if found is None:
            return False
        now = self.clock()
        if now - found.opened > self.lifetime or (
            key not in in_use and now - found.used > self.idle
        ):
            del self._logins[key]
            return False
        return True

    def touch(self, key: str) -> None:
        """A tab of this login closed: its idle time starts now."""
        if key in self._logins:
            self._logins[key].used = self.clock()

    def revoke(self, allowed: Callable[[str], bool]) -> set[str]:
        """Forget every login whose user is no longer ``allowed``; their users."""
        gone = {key for key, found in self._logins.items() if not allowed(found.user)}
        users = {self._logins[key].user for key in gone}
        for key in gone:
            del self._logins[key]
        return users
