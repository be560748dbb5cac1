"""What the hardened server refuses, against a real server on a real port, with plain
aiohttp clients: no token, a wrong token, a foreign Origin, one session too many — and
what it hands out: a login cookie no script can read, sent to this site only."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest

from cleveragents_tui.store.store import Store
from cleveragents_tui.web.config import ServeConfig
from cleveragents_tui.web.credentials import add_user
from cleveragents_tui.web.logins import cookie_name, login_key
from cleveragents_tui.web.server import AgentsServer
from cleveragents_tui.web.sessions import SESSION_MODULE, app_environment
from tests.web.conftest import TOKEN
from tests.web.serve_process import free_port

pytestmark = pytest.mark.anyio
WAIT = 120.0  # an app process starting on a busy 2-core machine


async def wait_until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(WAIT):
        while not condition():
            await asyncio.sleep(0.02)


def make_config(database: str, **options: object) -> ServeConfig:
    port = free_port()
    return ServeConfig.build(
        host="127.0.0.1",
        port=port,
        database_url=database,
        **{"token": TOKEN, **options},  # type: ignore[arg-type]
    )


async def running(config: ServeConfig) -> AsyncIterator[AgentsServer]:
    server = AgentsServer(config)
    runner = await server.start()
    try:
        yield server
    finally:
        await runner.cleanup()


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = str(tmp_path / "agents.db")
    Store.open(url).close()  # migrated, empty: the app shows an empty plan list
    return url


@pytest.fixture
async def server(database: str) -> AsyncIterator[AgentsServer]:
    async for served in running(make_config(database, max_sessions=1)):
        yield served


def base(server: AgentsServer) -> str:
    return server.config.public_url


def client() -> aiohttp.ClientSession:
    # unsafe=True: keep cookies for an IP address host (127.0.0.1), as a browser does
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def logged_in(server: AgentsServer, token: str = TOKEN) -> aiohttp.ClientSession:
    session = client()
    async with session.get(f"{base(server)}/?token={token}", allow_redirects=False) as response:
        assert response.status == 303
    return session


@asynccontextmanager
async def websocket(
    session: aiohttp.ClientSession, server: AgentsServer, origin: str | None = None
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    headers = {"Origin": origin if origin is not None else server.config.origin}
    url = f"{base(server)}/ws?width=100&height=30"
    async with session.ws_connect(url, headers=headers) as ws:
        yield ws


async def first_frame(ws: aiohttp.ClientWebSocketResponse) -> bytes:
    """The app's first output: the session really runs."""
    async with asyncio.timeout(WAIT):
        async for message in ws:
            if message.type is aiohttp.WSMsgType.BINARY:
                return bytes(message.data)
    raise AssertionError("the session closed without output")


async def test_no_token_no_page_no_websocket_no_files(server: AgentsServer) -> None:
    async with client() as session:
        for path in ("/", "/static/js/textual.js", "/download/x"):
            async with session.get(base(server) + path) as response:
                assert response.status == 401
                assert "needs its access token" in await response.text()
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            async with websocket(session, server):
                pass
        assert refused.value.status == 401


async def test_a_wrong_token_is_refused_and_gets_no_cookie(server: AgentsServer) -> None:
    async with client() as session:
        async with session.get(f"{base(server)}/?token={TOKEN}x") as response:
            assert response.status == 401
            assert "not valid for this server" in await response.text()
            assert not response.cookies
        assert len(session.cookie_jar) == 0


async def test_the_token_becomes_a_lax_http_only_cookie_of_this_server(
    server: AgentsServer,
) -> None:
    async with client() as session:
        url = f"{base(server)}/?fontsize=14&token={TOKEN}"
        async with session.get(url, allow_redirects=False) as response:
            assert response.status == 303
            assert response.headers["Location"] == "./?fontsize=14"  # the token leaves the URL
            cookie = response.cookies[cookie_name(server.config.public_url)]
            assert cookie["httponly"] and cookie["samesite"] == "Lax" and cookie["path"] == "/"
            assert not cookie["secure"]  # http://127.0.0.1: a Secure cookie would never return
            assert TOKEN not in cookie.value
        async with session.get(f"{base(server)}/") as page:
            assert page.status == 200
            html = await page.text()
            headers = page.headers
        assert f"ws://127.0.0.1:{server.config.port}/ws" in html
        assert "fonts.googleapis.com" not in html  # nothing loaded from elsewhere
        assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Frame-Options"] == "DENY" and headers["Referrer-Policy"] == "no-referrer"
        async with session.get(f"{base(server)}/static/js/textual.js") as script:
            assert script.status == 200
        async with session.get(f"{base(server)}/static/") as listing:
            assert listing.status in (403, 404)  # no directory listing


async def test_the_websocket_needs_the_public_origin(server: AgentsServer) -> None:
    async with await logged_in(server) as session:
        for origin in ("http://evil.example", f"http://localhost:{server.config.port}", ""):
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                async with websocket(session, server, origin=origin):
                    pass
            assert refused.value.status == 403
        async with session.post(
            f"{base(server)}/", headers={"Origin": "http://evil.example"}
        ) as post:
            assert post.status == 403
            assert "accepts only its own pages" in await post.text()
    assert server.slots.in_use == 0  # nothing was started


async def test_one_session_over_the_cap_is_refused_until_one_closes(
    server: AgentsServer,
) -> None:
    async with await logged_in(server) as session:
        async with websocket(session, server) as first:
            assert await first_frame(first)
            assert server.slots.in_use == 1
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                async with websocket(session, server):
                    pass
            assert refused.value.status == 503
            async with session.get(f"{base(server)}/") as page:
                assert page.status == 503
                assert "All 1 sessions of this agents server are in use" in await page.text()
        await wait_until(lambda: server.slots.in_use == 0)
        async with websocket(session, server) as again:
            assert await first_frame(again)


async def test_users_file_tokens_name_their_user(database: str, tmp_path: Path) -> None:
    users = tmp_path / "team.users"
    alice = add_user(users, "alice")
    config = make_config(database, token=None, users=users)
    assert config.shared_token is None  # with a users file, no shared token unless given
    async for server in running(config):
        async with client() as session, session.get(f"{base(server)}/?token={TOKEN}") as response:
            assert response.status == 401
        async with await logged_in(server, alice) as session:
            [cookie] = list(session.cookie_jar)
            assert server.logins.user(cookie.value, "127.0.0.1") == (
                login_key(cookie.value),
                "alice",
            )


async def test_shared_token_logins_are_named_per_browser(server: AgentsServer) -> None:
    names = set()
    for _ in range(2):
        async with await logged_in(server) as session:
            [cookie] = list(session.cookie_jar)
            found = server.logins.user(cookie.value, "127.0.0.1")
            assert found is not None
            names.add(found[1])
    assert len(names) == 2 and all(n.startswith("web:") and len(n) == 12 for n in names)


async def test_nothing_typed_reaches_a_shell(tmp_path: Path) -> None:
    """The database URL travels on the app's stdin: shell syntax in it stays a file name."""
    hostile = str(tmp_path / "a$(touch pwned);touch pwned2;.db")
    Store.open(hostile).close()
    async for server in running(make_config(hostile)):
        assert shlex.split(server.command) == [sys.executable, "-P", "-m", SESSION_MODULE]
        async with await logged_in(server) as session, websocket(session, server) as ws:
            assert await first_frame(ws)
    assert not (tmp_path / "pwned").exists() and not (Path.cwd() / "pwned").exists()
    assert not (Path.cwd() / "pwned2").exists()


def test_the_app_environment_has_neither_the_token_nor_the_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The app process is started before its tab is known: user, database URL (with its
    password) and export folder come on its stdin, and the server's token not at all."""
    monkeypatch.setenv("AGENTS_SERVE_TOKEN", TOKEN)
    monkeypatch.setenv("AGENTS_DATABASE_URL", "postgresql+psycopg://u:secret@db/agents")
    environment = app_environment()
    assert "AGENTS_SERVE_TOKEN" not in environment
    assert "AGENTS_DATABASE_URL" not in environment
    assert environment["TEXTUAL_DRIVER"] == "textual.drivers.web_driver:WebDriver"


async def test_the_public_url_decides_the_origin(database: str) -> None:
    """Served as http://localhost:PORT (as a reverse proxy's address would be): pages of
    that origin may open the websocket; the same server's bare address may not."""
    port = free_port()
    config = ServeConfig.build(
        host="127.0.0.1",
        port=port,
        database_url=database,
        token=TOKEN,
        public_url=f"http://localhost:{port}",
    )
    async for server in running(config):
        async with await logged_in(server) as session:
            async with session.get(f"{base(server)}/") as page:
                assert f"ws://localhost:{port}/ws" in await page.text()
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                async with websocket(session, server, origin=f"http://127.0.0.1:{port}"):
                    pass
            assert refused.value.status == 403
            async with websocket(session, server) as ws:
                assert await first_frame(ws)
