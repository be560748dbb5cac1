"""One browser tab = one app process: its command, its environment, and the session cap.

textual-serve runs its command through ``/bin/sh``; we start ours without a shell: the
interpreter's path and a module name, nothing a user typed, exec'd directly in a process
group of its own, with the server's environment minus its token. Everything else — the
tab's user and size, the database URL, the export folder — comes as the first line on the
app's stdin. So the next tab's process is started ahead (:class:`Spare`): a tab opens
without waiting for Python to load the app. Stopping a session is bounded: the app is
asked to quit, and after ``QUIT_TIMEOUT`` its whole process group is killed, with the
commands it runs for tools — a hung tab neither keeps its slot nor holds up the server's
shutdown, and leaves nothing running. What the app writes to stderr
(an error, a traceback) goes to the server's log one quoted line at a time — textual-serve
would copy it raw to the operator's terminal, escape sequences and forged lines included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
from asyncio.subprocess import Process
from collections.abc import Awaitable, Callable
from functools import cache, partial
from importlib.metadata import version
from pathlib import Path

from textual_serve.app_service import AppService
from textual_serve.download_manager import DownloadManager

from cleveragents_tui.web.credentials import TOKEN_ENV

DATABASE_ENV = "AGENTS_DATABASE_URL"
EXPORT_DIR_ENV = "AGENTS_WEB_EXPORT_DIR"  # set: exports are saved there; unset: downloads
SESSION_MODULE = "cleveragents_tui.web.session_main"
HEADER_LIMIT = 4096  # bytes of the tab's first stdin line (its user and size), at most
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


@cache
def _serve_version() -> str:
    """textual-serve's version, looked up once: each app start would scan the installed
    distributions' metadata again, on the event loop."""
    return version("textual-serve")


def app_environment() -> dict[str, str]:
    """The app process's environment: the server's, with textual-serve's settings for its
    web driver, without the server's token. The database URL and the export folder come in
    the tab's first line, so a process can be started before the server has read them."""
    environment = dict(os.environ)
    environment.update(  # as textual-serve's AppService._build_environment sets them
        TEXTUAL_DRIVER="textual.drivers.web_driver:WebDriver",
        TEXTUAL_FPS="60",
        TEXTUAL_COLOR_SYSTEM="truecolor",
        TERM_PROGRAM="textual",
        TERM_PROGRAM_VERSION=_serve_version(),
    )
    for name in (TOKEN_ENV, DATABASE_ENV, EXPORT_DIR_ENV):
        environment.pop(name, None)
    return environment


async def start_app() -> Process:
    """The app itself (no shell in between), leading its own process group, so that a
    session's stop can end it and anything it started."""
    return await asyncio.create_subprocess_exec(
        *session_argv(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=app_environment(),
        start_new_session=True,
    )


def start_first_app() -> subprocess.Popen[bytes]:
    """The first spare, started by ``agents serve`` before it loads the server or checks
    the database (no event loop runs yet): its start overlaps the server's own. If the
    server never takes it, it ends when its stdin closes with the server."""
    return subprocess.Popen(
        session_argv(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=app_environment(),
        start_new_session=True,
    )


class AdoptedApp:
    """A :func:`start_first_app` process on the event loop: the parts of
    ``asyncio.subprocess.Process`` that textual-serve and :class:`SessionService` use."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
    ) -> None:
        self._popen, self.pid = popen, popen.pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr

    @classmethod
    async def adopt(cls, popen: subprocess.Popen[bytes]) -> AdoptedApp:
        loop = asyncio.get_running_loop()
        readers = []
        for pipe in (popen.stdout, popen.stderr):
            reader = asyncio.StreamReader()
            await loop.connect_read_pipe(partial(asyncio.StreamReaderProtocol, reader), pipe)
            readers.append(reader)
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), popen.stdin
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(popen, writer, readers[0], readers[1])

    @property
    def returncode(self) -> int | None:
        return self._popen.poll()

    async def wait(self) -> int:
        return await asyncio.to_thread(self._popen.wait)


async def end_app(process: Process | AdoptedApp) -> None:
    """Kill the process group of an app that has not exited, and the commands it runs
    for tools (each in a session of its own, see actors/process.py: the app would have
    killed them at their timeout, but it is gone), then reap it."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):  # (a reaped leader's id: no kill)
            os.killpg(process.pid, signal.SIGSTOP)  # it starts nothing more while we look
        commands: set[int] = set()
        try:
            commands = await asyncio.to_thread(groups_below, process.pid)
        finally:  # cancelled while looking: the app is killed all the same, never left stopped
            for group in (process.pid, *commands):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
        await process.wait()


def groups_below(pid: int) -> set[int]:
    """The process groups of the processes below ``pid``, other than its own (read from
    Linux's /proc; elsewhere none)."""
    found: dict[int, tuple[int, int]] = {}  # pid: (parent, group)
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if entry.name.isdigit():
                try:
                    with open(f"/proc/{entry.name}/stat", "rb") as file:
                        fields = file.read().rsplit(b")", 1)[1].split()
                except OSError:  # it ended meanwhile
                    continue
                found[int(entry.name)] = int(fields[1]), int(fields[2])
    below: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, (parent, _) in found.items() if parent in frontier}
        below |= frontier
    return {found[child][1] for child in below} - {pid}


class Spare:
    """One app process started ahead of the next tab: it loads Python and the app's modules
    (most of a tab's start) while nobody waits, then waits for its tab's first line. A tab
    takes it, and the next spare starts at once; one that died meanwhile, or could not be
    started, is replaced by a new start for that tab, and the one after is started all the
    same."""

    def __init__(self, first: subprocess.Popen[bytes] | None = None) -> None:
        self._first = first
        self._next: asyncio.Task[Process | AdoptedApp] | None = None
        self.closed = False

    def fill(self) -> None:
        if self._next is None and not self.closed:
            first, self._first = self._first, None
            started = AdoptedApp.adopt(first) if first is not None else start_app()
            self._next = asyncio.create_task(started)

    @property
    def pid(self) -> int | None:
        """The waiting spare's process id (None while none has started)."""
        task = self._next
        if task is None or not task.done() or task.exception() is not None:
            return None
        return task.result().pid

    async def take(self) -> Process | AdoptedApp:
        task, self._next = self._next, None
        self.fill()  # first: a spare that failed must not stop the next one from starting
        process = await _started(task) if task is not None else None
        if process is None or process.returncode is not None:
            return await start_app()
        return process

    async def close(self) -> None:
        """The server stops: the waiting spare ends (it has no tab, nothing to save)."""
        self.closed = True
        task, self._next = self._next, None
        if task is not None:
            if (process := await _started(task)) is not None:
                await end_app(process)
        elif self._first is not None:
            self._first.kill()
            self._first.wait()


async def _started(task: asyncio.Task[Process | AdoptedApp]) -> Process | AdoptedApp | None:
    """The spare's process, or None (and one log line) when it could not be started."""
    try:
        return await task
    except Exception as exc:  # whatever it was, the tab starts its own app
        log.warning("the app started ahead for the next tab failed to start: %r", exc)
        return None


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
        spare: Spare | None = None,
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
        self.spare = spare
        self._output: asyncio.Task[None] | None = None

    async def _open_app_process(  # type: ignore[override]
        self, width: int = 80, height: int = 24
    ) -> Process | AdoptedApp:
        """The spare app process (or a new one), told its tab: user and size."""
        process = await self.spare.take() if self.spare is not None else await start_app()
        self._process = process  # type: ignore[assignment] # an AdoptedApp serves as one
        assert process.stdin is not None and process.stderr is not None
        self._stdin = process.stdin
        header = {
            "user": self.user,
            "columns": width,
            "rows": height,
            "database": self.database_url,
            "export_dir": str(self.export_dir) if self.export_dir is not None else None,
        }
        process.stdin.write(json.dumps(header).encode("utf-8") + b"\n")
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
        except TimeoutError:  # busy (a replay's step) or hung: the operator is told why
            log.warning("the app of %r did not quit within %g s: killed", self.user, QUIT_TIMEOUT)
        if process is not None:
            await end_app(process)
        if self._output is not None:  # its last lines; a child that kept stderr open: cut off
            await asyncio.wait([self._output], timeout=OUTPUT_TIMEOUT)
            self._output.cancel()
