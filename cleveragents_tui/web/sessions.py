"""One browser tab = one app process: its command, its environment, and the session cap.

textual-serve runs its command through ``/bin/sh``. Ours is a constant built with
``shlex.join`` from the interpreter's path and a module name: nothing a user typed is in
it. The per-session values (the user's name, the database URL) reach the child as
environment variables, which no shell parses, and the server's own token is removed from
the child's environment.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Awaitable, Callable

from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from cleveragents_tui.web.credentials import TOKEN_ENV

USER_ENV = "AGENTS_WEB_USER"
DATABASE_ENV = "AGENTS_DATABASE_URL"
SESSION_MODULE = "cleveragents_tui.web.session_main"
QUIT_TIMEOUT = 10.0  # seconds an app gets to quit before it is killed


def session_command() -> str:
    """``python -P -m ...``: -P keeps the working directory off ``sys.path``, so a
    ``cleveragents_tui`` folder where the server was started cannot stand in for ours."""
    return shlex.join([sys.executable, "-P", "-m", SESSION_MODULE])


class SessionSlots:
    """At most ``limit`` sessions at once. Take and release run on the event loop's thread
    with no await between check and update, so two tabs cannot both take the last slot."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0

    @property
    def full(self) -> bool:
        return self.in_use >= self.limit

    def take(self) -> bool:
        if self.full:
            return False
        self.in_use += 1
        return True

    def release(self) -> None:
        self.in_use -= 1


class SessionService(AppService):
    """textual-serve's process manager, with this session's user and database."""

    def __init__(
        self,
        *,
        user: str,
        database_url: str,
        write_bytes: Callable[[bytes], Awaitable[None]],
        write_str: Callable[[str], Awaitable[None]],
        close: Callable[[], Awaitable[None]],
        download_manager: DownloadManager,
    ) -> None:
        super().__init__(
            session_command(),
            write_bytes=write_bytes,
            write_str=write_str,
            close=close,
            download_manager=download_manager,
        )
        self.user = user
        self.database_url = database_url

    async def stop(self) -> None:
        """Ask the app to quit (textual-serve's stop), then reap its process: no session
        outlives the server, and no process is left for the event loop to complain about."""
        await super().stop()
        process = self._process
        if process is None or process.returncode is not None:
            return
        try:
            await asyncio.wait_for(process.wait(), QUIT_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = super()._build_environment(width=width, height=height)
        environment.pop(TOKEN_ENV, None)
        environment[USER_ENV] = self.user
        environment[DATABASE_ENV] = self.database_url
        return environment
