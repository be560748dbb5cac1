"""One browser tab = one app process: its command, its environment, and the session cap.

textual-serve runs its command through ``/bin/sh``; we start ours without a shell: the
interpreter's path and a module name, nothing a user typed, exec'd directly in a process
group of its own. The per-session values (the user's name, the database URL) reach the
child as environment variables, and the server's own token is removed from the child's
environment. Stopping a session is bounded: the app is asked to quit, and after
``QUIT_TIMEOUT`` its whole process group is killed — a hung tab neither keeps its slot nor
holds up the server's shutdown. What the app writes to stderr (an error, a traceback) goes
to the server's log one quoted line at a time — textual-serve would copy it raw to the
operator's terminal, escape sequences and forged lines included.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
from asyncio.subprocess import Process
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from cleveragents_tui.web.credentials import TOKEN_ENV

USER_ENV = "AGENTS_WEB_USER"
DATABASE_ENV = "AGENTS_DATABASE_URL"
EXPORT_DIR_ENV = "AGENTS_WEB_EXPORT_DIR"  # set: exports are saved there; unset: downloads
SESSION_MODULE = "cleveragents_tui.web.session_main"
QUIT_TIMEOUT = 10.0  # seconds an app gets to quit before it is killed
OUTPUT_TIMEOUT = 1.0  # seconds the app's last stderr lines get to reach the log after it ends

log = logging.getLogger("agents.serve")


def session_argv() -> list[str]:
    """``python -P -m ...``: -P keeps the working directory off ``sys.path``, so a
    ``cleveragents_tui`` folder where the server was started cannot stand in for ours."""
    return [sys.executable, "-P", "-m", SESSION_MODULE]


def session_command() -> str:
    """The same, as the one string textual-serve's server is built with."""
    return shlex.join(session_argv())


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
        export_dir: Path | None = None,
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
        self.export_dir = export_dir
        self._output: asyncio.Task[None] | None = None

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Process:
        """The app itself as the child (no shell in between), leading its own process
        group, so that :meth:`stop` can end it and anything it started."""
        self._process = process = await asyncio.create_subprocess_exec(
            *session_argv(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self._build_environment(width=width, height=height),
            start_new_session=True,
        )
        assert process.stdin is not None and process.stderr is not None
        self._stdin = process.stdin
        self._output = asyncio.create_task(self._log_output(process.stderr))
        ended = asyncio.StreamReader()  # upstream reads (and would print raw) an empty stderr
        ended.feed_eof()
        process.stderr = ended
        return process

    async def _log_output(self, stderr: asyncio.StreamReader) -> None:
        """Each line the app writes to stderr, as one log line with the line quoted."""
        while True:
            try:
                line = await stderr.readline()
            except ValueError:  # longer than the stream's limit (64 KiB): dropped
                log.warning("the app of %r wrote a line too long to log", self.user)
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip("\n")
            log.warning("the app of %r wrote: %r", self.user, text)

    async def stop(self) -> None:
        """Ask the app to quit (textual-serve's stop) for at most ``QUIT_TIMEOUT``
        seconds, then kill its process group and reap it: no session outlives the server,
        and a hung one is ended all the same."""
        process = self._process
        try:
            await asyncio.wait_for(super().stop(), QUIT_TIMEOUT)
            if process is not None:
                await asyncio.wait_for(process.wait(), QUIT_TIMEOUT)
        except TimeoutError:
            pass
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # (a reaped leader's id: no kill)
                os.killpg(process.pid, signal.SIGKILL)  # the group: the app and its children
            await process.wait()
        if self._output is not None:  # its last lines; a child that kept stderr open: cut off
            await asyncio.wait([self._output], timeout=OUTPUT_TIMEOUT)
            self._output.cancel()

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = super()._build_environment(width=width, height=height)
        environment.pop(TOKEN_ENV, None)
        environment[USER_ENV] = self.user
        environment[DATABASE_ENV] = self.database_url
        environment.pop(EXPORT_DIR_ENV, None)
        if self.export_dir is not None:
            environment[EXPORT_DIR_ENV] = str(self.export_dir)
        return environment
