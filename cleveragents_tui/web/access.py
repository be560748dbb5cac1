"""Who may open the app *now*: the shared token and the users file as it is at this moment.

A users file changed while the server runs (``agents serve --revoke USER``, a line deleted
by hand, a user added) takes effect at the next request, and the server's watcher ends the
open logins and tabs of users no longer listed. A users file that cannot be read any more
fails closed: only the shared token (if any) works until it is fixed. Single shared-token
logins are ended through the revocation file (:mod:`cleveragents_tui.web.revocations`),
re-read the same way; one that cannot be read keeps the logins it revoked before.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.web.config import ServeConfig
from cleveragents_tui.web.credentials import Credentials, read_users
from cleveragents_tui.web.revocations import read_revoked

log = logging.getLogger("agents.serve")

Stamp = tuple[int, int, int, int] | None


def _stamp(path: Path) -> Stamp:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns  # ctime: chmod


class Access:
    def __init__(self, config: ServeConfig) -> None:
        self._users = config.users
        self._shared = tuple(e for e in config.credentials.entries if e[1] is None)
        self._credentials = config.credentials
        self._stamp = _stamp(config.users) if config.users is not None else None
        self._revocations = config.revocations
        self._revoked: frozenset[str] = frozenset()
        self._revoked_stamp: Stamp = None

    @property
    def credentials(self) -> Credentials:
        """The credentials, re-read when the users file changed since the last look."""
        if self._users is not None and (stamp := _stamp(self._users)) != self._stamp:
            self._stamp = stamp
            try:
                users = read_users(self._users)
            except UserError as exc:
                log.error("%s: its users are logged out until it is fixed", exc)
                users = ()
            self._credentials = Credentials((*self._shared, *users))
            log.info("users file %s re-read: %d users", self._users, len(users))
        return self._credentials

    @property
    def revoked(self) -> frozenset[str]:
        """The shared-token logins ended by hand, re-read when the file changed."""
        path = self._revocations
        if path is not None and (stamp := _stamp(path)) != self._revoked_stamp:
            self._revoked_stamp = stamp  # an unreadable file: logged once, until it changes
            try:
                self._revoked = read_revoked(path)
            except OSError as exc:
                log.error("cannot read the revocation file %s: %s", path, exc.strerror)
        return self._revoked

    def allows(self, user: str) -> bool:
        """``user`` (a login's name) may still use the server."""
        entries = self.credentials.entries
        if user.startswith("web:"):
            if user in self.revoked:
                return False
            return any(owner is None for _, owner in entries)
        return any(owner == user for _, owner in entries)
