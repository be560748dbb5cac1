"""textual-serve, hardened: the same routes behind :mod:`guard`, a session cap, one app
process per tab with its user's name, and no access log (the first URL carries a token).

From textual-serve's :class:`Server` this reuses the page, the download route and the
websocket message loop; the websocket handler is ours (the cap, the per-session user).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import subprocess
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp_jinja2
import jinja2
from aiohttp import WSCloseCode, web
from textual_serve.server import Server, to_int

from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.web.access import Access
from cleveragents_tui.web.config import ServeConfig
from cleveragents_tui.web.guard import LOGIN_KEY, USER_KEY, WEBSOCKET_PATH, guard
from cleveragents_tui.web.listen import listening_site
from cleveragents_tui.web.log_lines import OneLineErrors
from cleveragents_tui.web.logins import Logins
from cleveragents_tui.web.sessions import (
    SessionService,
    SessionSlots,
    Spare,
    session_command,
)

log = logging.getLogger("agents.serve")

TEMPLATES = Path(__file__).with_name("templates")
TITLE = "cleveragents"
WATCH_INTERVAL = 2.0  # seconds between looks for revoked or expired logins with open tabs


class AgentsServer(Server):
    def __init__(
        self, config: ServeConfig, first_app: subprocess.Popen[bytes] | None = None
    ) -> None:
        super().__init__(
            session_command(),
            host=config.host,
            port=config.port,
            title=TITLE,
            public_url=config.public_url,
            templates_path=TEMPLATES,
        )
        self.config = config
        self.access = Access(config)
        self.logins = Logins(idle=config.login_idle, lifetime=config.login_lifetime)
        self.slots = SessionSlots(config.max_sessions)
        self.tabs: dict[str, set[web.WebSocketResponse]] = {}  # open tabs by login
        self.spare = Spare(first_app)

    def full_message(self) -> str:
        return (
            f"All {self.slots.limit} sessions of this agents server are in use "
            f"(agents serve --max-sessions {self.slots.limit}). Close a tab you no longer "
            "need, or ask whoever runs the server to raise --max-sessions."
        )

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[guard(self.config, self.access, self.logins)])
        app.cleanup_ctx.append(self._watching)
        app.on_shutdown.append(self._close_tabs)
        aiohttp_jinja2.setup(
            app, loader=jinja2.FileSystemLoader(self.templates_path), autoescape=True
        )
        app.add_routes(
            [
                web.get("/", self.handle_index, name="index"),
                web.get(WEBSOCKET_PATH, self.handle_websocket, name="websocket"),
                web.get("/download/{key}", self.handle_download, name="download"),
                web.static("/static", self.statics_path, name="static"),
            ]
        )
        return app

    async def _watching(self, _: web.Application) -> AsyncIterator[None]:
        """While serving: the watcher of logins, and the next tab's app started ahead."""
        self.spare.fill()
        task = asyncio.create_task(self._watch())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await self.spare.close()

    async def _close_tabs(self, _: web.Application) -> None:
        """Shutting down: every tab's websocket is closed, so each session stops its app
        (bounded, see :meth:`SessionService.stop`) instead of aiohttp waiting for them."""
        for tabs in list(self.tabs.values()):
            for tab in list(tabs):
                await tab.close(code=WSCloseCode.GOING_AWAY, message=b"server shutting down")

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_INTERVAL)
            await self.end_lost_logins()

    async def end_lost_logins(self) -> None:
        """Close the tabs of logins that ended: revoked (the users file or the revocation
        file changed) or their lifetime over. A tab that is open is never idle."""
        for user in self.logins.revoke(self.access.allows):
            log.info("logins of %r ended: revoked (the users or the revocation file)", user)
        for key, tabs in list(self.tabs.items()):
            if not self.logins.alive(key, in_use=self.tabs):
                for tab in list(tabs):
                    await tab.close(message=b"login ended")

    async def handle_index(self, request: web.Request) -> web.StreamResponse:
        if self.slots.full:
            raise web.HTTPServiceUnavailable(text=self.full_message())
        if request.host != self.config.origin.split("://", 1)[1]:
            log.warning(
                "the page was opened as %r but the public URL is %s: its websocket will be "
                "refused (set --public-url to the address people open)",
                request.host,
                self.config.public_url,
            )
        response: web.StreamResponse = await super().handle_index(request)
        return response

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        user, login = request[USER_KEY], request[LOGIN_KEY]
        if not self.slots.take():
            log.warning("refused a session for %r: all %d in use", user, self.slots.limit)
            raise web.HTTPServiceUnavailable(text=self.full_message())
        websocket = web.WebSocketResponse(heartbeat=15)
        tabs = self.tabs.setdefault(login, set())
        tabs.add(websocket)
        try:
            return await self._session(request, user, websocket)
        finally:
            tabs.discard(websocket)
            if not tabs:
                del self.tabs[login]
                self.logins.touch(login)
            self.slots.release()

    async def _session(
        self, request: web.Request, user: str, websocket: web.WebSocketResponse
    ) -> web.WebSocketResponse:
        await websocket.prepare(request)

        async def close() -> None:
            await websocket.close()

        service = SessionService(
            user=user,
            database_url=self.config.database_url,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=close,
            download_manager=self.download_manager,
            export_dir=self.config.export_dir,
            spare=self.spare,
        )
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        log.info("session for %r opened (%d of %d)", user, self.slots.in_use, self.slots.limit)
        await service.start(width, height)
        try:
            await self._process_messages(websocket, service)
        finally:
            await service.stop()
            await websocket.close()
            log.info("session for %r closed", user)
        return websocket

    async def start(self) -> web.AppRunner:
        """Listen (a busy port is a user error); the caller cleans the runner up."""
        runner = web.AppRunner(self.make_app(), handle_signals=False, access_log=None)
        await runner.setup()
        try:
            await listening_site(runner, self.config.host, self.config.port).start()
        except OSError as exc:
            await runner.cleanup()
            raise UserError(
                f"cannot listen on {self.config.host}:{self.config.port}: {exc.strerror}",
                "choose another --port or --host, or stop what is using it",
            ) from exc
        return runner

    async def run_until_stopped(self, ready: Callable[[], None]) -> None:
        """Serve until SIGINT or SIGTERM; then every session's app is told to quit."""
        runner = await self.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            ready()
            await stop.wait()
        finally:
            await runner.cleanup()


class PrintableFormatter(logging.Formatter):
    """Log lines quote request paths, origins and user names sent by anyone who can reach
    the server: each message is one line with its control characters escaped, so it can
    neither forge a second log line nor send an escape sequence to the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), one_line=True)


def serve(
    config: ServeConfig, ready: Callable[[], None], first_app: subprocess.Popen[bytes] | None
) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(PrintableFormatter("%(asctime)s %(message)s", datefmt="%H:%M:%S"))
    handler.addFilter(OneLineErrors())  # a bad request is one line, not a traceback
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    for name in ("agents.serve", "textual-serve"):  # not the libraries' chatter (alembic's)
        logging.getLogger(name).setLevel(logging.INFO)
    asyncio.run(AgentsServer(config, first_app).run_until_stopped(ready))
