"""Everything ``agents serve`` was asked for, checked before anything listens.

Standard library only: the CLI imports this at start-up, and the server (aiohttp,
textual-serve) only when it really serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.web.addresses import default_public_url, is_loopback, normalise_public_url
from cleveragents_tui.web.credentials import (
    Credentials,
    check_token,
    digest,
    new_token,
    read_users,
)
from cleveragents_tui.web.logins import DEFAULT_IDLE_HOURS, DEFAULT_LIFETIME_HOURS

DEFAULT_MAX_SESSIONS = 8


@dataclass(frozen=True)
class ServeConfig:
    host: str
    port: int
    public_url: str
    origin: str
    database_url: str
    credentials: Credentials
    max_sessions: int = DEFAULT_MAX_SESSIONS
    shared_token: str | None = None  # printed in the URL to open; None with a users file only
    users: Path | None = None  # re-read while serving: a change takes effect without restart
    login_idle: float = DEFAULT_IDLE_HOURS * 3600  # seconds a login lasts unused
    login_lifetime: float = DEFAULT_LIFETIME_HOURS * 3600  # seconds a login lasts at most
    export_dir: Path | None = None  # resolved; None: exports are downloads to the browser
    revocations: Path | None = None  # shared-token logins ended by hand (web/revocations.py)

    @property
    def secure(self) -> bool:
        return self.public_url.startswith("https://")

    @classmethod
    def build(
        cls,
        *,
        host: str,
        port: int,
        database_url: str,
        public_url: str | None = None,
        token: str | None = None,
        users: Path | None = None,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        login_idle_hours: float = DEFAULT_IDLE_HOURS,
        login_lifetime_hours: float = DEFAULT_LIFETIME_HOURS,
        export_dir: Path | None = None,
        revocations: Path | None = None,
    ) -> ServeConfig:
        """Refuse a non-loopback bind unless access was set up on purpose (a token given,
        or a users file); otherwise a token is generated for this run."""
        if not is_loopback(host) and token is None and users is None:
            raise UserError(
                f"--host {host or '(empty)'} is reachable from the network and no token was given",
                "pass --token (or AGENTS_SERVE_TOKEN) or --users FILE, or serve on 127.0.0.1",
            )
        if max_sessions < 1:
            raise UserError("--max-sessions must be at least 1")
        if not 0 < login_idle_hours <= login_lifetime_hours:
            raise UserError(
                f"--login-idle {login_idle_hours:g} must be more than 0 and at most "
                f"--login-lifetime {login_lifetime_hours:g} (hours)",
                "give a shorter --login-idle or a longer --login-lifetime",
            )
        if export_dir is not None and not export_dir.is_dir():
            raise UserError(
                f"--export-dir {export_dir} is not a folder", "create it, or name another one"
            )
        url, origin = normalise_public_url(public_url or default_public_url(host, port))
        shared = check_token(token) if token is not None else None
        user_entries = read_users(users) if users is not None else ()
        if shared is None and not user_entries:
            if users is not None:
                raise UserError(f"the users file {users} lists nobody", "add one with --add-user")
            shared = new_token()
        entries: tuple[tuple[bytes, str | None], ...] = tuple(user_entries)
        if shared is not None:
            entries = ((digest(shared), None), *entries)
        return cls(
            host=host,
            port=port,
            public_url=url,
            origin=origin,
            database_url=database_url,
            credentials=Credentials(entries),
            max_sessions=max_sessions,
            shared_token=shared,
            users=users,
            login_idle=login_idle_hours * 3600,
            login_lifetime=login_lifetime_hours * 3600,
            export_dir=export_dir.resolve() if export_dir is not None else None,
            revocations=revocations,
        )
