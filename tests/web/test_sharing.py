"""Browser mode once a second person uses it (issue 18), against a real server on a real
port with plain aiohttp clients: logins are this server's own, bound to the address that
made them, revocable while the server runs and ending on their own; a hung tab gives its
slot back and does not hold up shutdown; every logged value is quoted."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import aiohttp
import pytest
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from cleveragents_tui.web.access import Access
from cleveragents_tui.web.credentials import add_user
from cleveragents_tui.web.revocations import revocations_file
from cleveragents_tui.web.server import AgentsServer
from cleveragents_tui.web.sessions import SESSION_MODULE, Spare, end_app
from tests.web.conftest import TOKEN
from tests.web.serve_process import descendants, free_port, start_serve
from tests.web.test_security import (
    WAIT,
    base,
    client,
    database,
    first_frame,
    logged_in,
    make_config,
    running,
    server,
    wait_until,
    websocket,
)

pytestmark = pytest.mark.anyio
__all__ = ["database", "server"]  # fixtures shared with test_security


async def page_status(session: aiohttp.ClientSession, server: AgentsServer) -> int:
    async with session.get(f"{base(server)}/", allow_redirects=False) as response:
        return response.status


async def test_two_servers_on_one_host_keep_their_own_logins(database: str) -> None:
    """One browser, two servers on two ports: a host-only cookie goes to both, so a shared
    cookie name would let the second login replace the first."""
    async for first in running(make_config(database)):
        async for second in running(make_config(database)):
            async with client() as browser:
                for server in (first, second):
                    url = f"{base(server)}/?token={TOKEN}"
                    async with browser.get(url, allow_redirects=False) as response:
                        assert response.status == 303
                assert len(browser.cookie_jar) == 2
                assert await page_status(browser, first) == 200
                assert await page_status(browser, second) == 200


async def test_a_copied_cookie_does_not_work_from_another_address(database: str) -> None:
    """A login cookie copied to another machine (here: another loopback address) is not a
    login there, with the right Origin forged or not."""
    async for srv in running(make_config(database)):
        async with await logged_in(srv) as browser:
            [cookie] = list(browser.cookie_jar)
            assert await page_status(browser, srv) == 200
        connector = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
        async with aiohttp.ClientSession(
            connector=connector, cookies={cookie.key: cookie.value}
        ) as thief:
            assert await page_status(thief, srv) == 401
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                async with websocket(thief, srv):
                    pass
            assert refused.value.status == 401
        assert srv.slots.in_use == 0


async def test_logins_end_when_idle_and_at_their_lifetime(database: str) -> None:
    now = [0.0]
    config = make_config(database, login_idle_hours=1.0, login_lifetime_hours=2.0)
    async for srv in running(config):
        srv.logins.clock = lambda: now[0]
        async with await logged_in(srv) as browser:
            now[0] = 3000.0
            assert await page_status(browser, srv) == 200  # used: idle starts again
            now[0] = 3000.0 + 3601.0
            assert await page_status(browser, srv) == 401  # idle more than an hour
        async with await logged_in(srv) as browser:
            now[0] += 7201.0
            assert await page_status(browser, srv) == 401  # past its lifetime


async def test_revoking_a_user_ends_their_logins_and_tabs_without_restart(
    database: str, tmp_path: Path
) -> None:
    users = tmp_path / "team.users"
    alice, bob = add_user(users, "alice"), add_user(users, "bob")
    config = make_config(database, token=None, users=users, max_sessions=2)
    async for srv in running(config):
        async with await logged_in(srv, alice) as hers, await logged_in(srv, bob) as his:
            async with websocket(hers, srv) as tab:
                assert await first_frame(tab)
                result = CliRunner().invoke(
                    cli, ["--db", database, "serve", "--users", str(users), "--revoke", "alice"]
                )
                assert result.exit_code == 0, result.output
                assert "removed alice" in result.output
                async with asyncio.timeout(WAIT):
                    async for _ in tab:  # the srv closes her open tab
                        pass
                assert tab.closed
            assert await page_status(hers, srv) == 401
            assert await page_status(his, srv) == 200
            async with client() as again, again.get(f"{base(srv)}/?token={alice}") as page:
                assert page.status == 401  # her token is gone too
        slots = srv.slots
        await wait_until(lambda: slots.in_use == 0)  # noqa: B023 - awaited in this iteration


async def test_one_shared_token_login_is_revoked_the_others_keep_working(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two browsers logged in with the one shared token: ``--revoke web:…`` (the name the
    log shows) ends the first one's login and open tab; the second and the token work on."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # this account's files
    config = make_config(database, revocations=revocations_file(), max_sessions=2)
    async for srv in running(config):
        async with await logged_in(srv) as first, await logged_in(srv) as second:
            [cookie] = list(first.cookie_jar)
            found = srv.logins.user(cookie.value, "127.0.0.1")
            assert found is not None
            async with websocket(first, srv) as tab:
                assert await first_frame(tab)
                result = CliRunner().invoke(cli, ["--db", database, "serve", "--revoke", found[1]])
                assert result.exit_code == 0, result.output
                assert f"revoked the login {found[1]}" in result.output
                async with asyncio.timeout(WAIT):
                    async for _ in tab:  # the server closes the revoked login's tab
                        pass
                assert tab.closed
            assert await page_status(first, srv) == 401
            assert await page_status(second, srv) == 200
            async with websocket(second, srv) as other:
                assert await first_frame(other)
        slots = srv.slots
        await wait_until(lambda: slots.in_use == 0)  # noqa: B023 - awaited in this iteration
        async with await logged_in(srv) as again:  # the shared token itself still works
            assert await page_status(again, srv) == 200


def test_revoke_of_a_name_that_is_no_login_is_one_line(tmp_path: Path) -> None:
    database = str(tmp_path / "agents.db")
    result = CliRunner().invoke(cli, ["--db", database, "serve", "--revoke", "web:xyz"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: 'web:xyz' is not a shared-token login: give the name the server's log shows "
        "after 'login:', e.g. web:3f9a12cd"
    )


def test_revoke_needs_a_listed_user(tmp_path: Path) -> None:
    users = tmp_path / "team.users"
    add_user(users, "alice")
    database = str(tmp_path / "agents.db")
    result = CliRunner().invoke(
        cli, ["--db", database, "serve", "--users", str(users), "--revoke", "carol"]
    )
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: carol is not in {users}: check the name (the file lists one per line)"
    )


def app_processes() -> set[int]:
    """The tabs' app processes below this one (not, say, a PostgreSQL server a fixture
    started)."""
    found = set()
    for pid in descendants(os.getpid()):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if SESSION_MODULE.encode() in command:
            found.add(pid)
    return found


def freeze_apps(server: AgentsServer) -> set[int]:
    """SIGSTOP the tab's app (not the spare started for the next tab): it hangs and answers
    nothing."""
    apps = app_processes() - {server.spare.pid}
    assert apps, "no app process is running"
    for pid in apps:
        os.kill(pid, signal.SIGSTOP)
    return apps


async def test_a_hung_tab_gives_its_slot_back(server: AgentsServer) -> None:
    async with await logged_in(server) as browser:
        async with websocket(browser, server) as tab:
            assert await first_frame(tab)
            hung = freeze_apps(server)
        await wait_until(lambda: server.slots.in_use == 0)
        assert not hung & app_processes()  # killed and reaped
        async with websocket(browser, server) as again:
            assert await first_frame(again)


async def test_a_hung_tab_does_not_block_shutdown(database: str) -> None:
    server = AgentsServer(make_config(database))
    runner = await server.start()
    async with await logged_in(server) as browser, websocket(browser, server) as tab:
        assert await first_frame(tab)
        freeze_apps(server)
        async with asyncio.timeout(WAIT):
            await runner.cleanup()
    assert not app_processes()  # the hung tab's and the spare waiting for the next tab


ESC_ORIGIN = b"http://evil.example\x1b]0;owned\x07"  # aiohttp refuses it: 400
C1_ORIGIN = "http://evil.example\u009b2J".encode()  # CSI as one character: allowed in a header


def test_every_logged_value_is_quoted(tmp_path: Path) -> None:
    """CR, LF and ESC in a request's path, its headers and a user name in the users file:
    each log line stays one line, with every value quoted and escaped (repr-style)."""
    database = str(tmp_path / "agents.db")
    users = tmp_path / "team.users"
    add_user(users, "alice")
    port = free_port()
    served, _ = start_serve(
        database, port, "--users", str(users), workdir=tmp_path, env={"AGENTS_SERVE_TOKEN": TOKEN}
    )
    try:
        for origin, status in ((ESC_ORIGIN, b" 400 "), (C1_ORIGIN, b" 403 ")):
            with socket.create_connection(("127.0.0.1", port)) as raw:  # before any login
                raw.sendall(
                    b"POST /x%0D%0A12:00:00%20login:%20'mallory'%1B[2J HTTP/1.1\r\n"
                    b"Host: 127.0.0.1\r\nOrigin: " + origin + b"\r\n"
                    b"Content-Length: 0\r\nConnection: close\r\n\r\n"
                )
                assert status in raw.recv(4096)
        users.write_text(f"mal\x1b[2Jlory sha256:{'a' * 64}\n")  # read while serving
        with socket.create_connection(("127.0.0.1", port)) as raw:
            raw.sendall(
                f"GET /?token={TOKEN} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
            )
            assert b" 303 " in raw.recv(4096)
    finally:
        assert served.stop() == 0
    log = served.stderr()
    assert "\x1b" not in log and "\r" not in log and "\x07" not in log
    lines = log.splitlines()
    assert all(line[:2].isdigit() and line[2] == ":" for line in lines), lines
    assert "\x9b" not in log
    assert (
        "refused 'POST' \"/x\\r\\n12:00:00 login: 'mallory'\\x1b[2J\" "
        "from origin 'http://evil.example\\x9b2J'"
    ) in log
    assert "user name 'mal\\x1b[2Jlory' is not allowed" in log  # the users file, re-read


FORGED = "db\x1b[2J\n12:00:00 login: 'mallory'"  # a folder name: the tab's error repeats it


def test_the_apps_error_output_reaches_the_log_quoted(tmp_path: Path) -> None:
    """A tab's app that fails writes its error to stderr; the server logs it one quoted
    line at a time instead of copying it raw to the operator's terminal."""
    folder = tmp_path / FORGED
    folder.mkdir()
    database = str(folder / "agents.db")
    port = free_port()
    served, _ = start_serve(database, port, workdir=tmp_path, env={"AGENTS_SERVE_TOKEN": TOKEN})
    try:
        shutil.rmtree(folder)  # the tab's app cannot open the database: it says why

        async def open_a_tab() -> None:
            async with client() as browser:
                url = f"http://127.0.0.1:{port}"
                async with browser.get(f"{url}/?token={TOKEN}", allow_redirects=False):
                    pass
                headers = {"Origin": url}
                async with browser.ws_connect(f"{url}/ws", headers=headers):
                    await wait_until(lambda: "wrote: 'error" in served.stderr())

        asyncio.run(open_a_tab())
    finally:
        assert served.stop() == 0
    output = []
    while (line := served.next_line()) != "":
        output.append(line)
    log = served.stderr()
    for text in (log, "\n".join(output)):
        assert "\x1b" not in text and "login: 'mallory'\n" not in text
    assert all(line[:2].isdigit() and line[2] == ":" for line in log.splitlines()), log
    assert "wrote: 'error: cannot create the database" in log
    assert "db\\x1b[2J'" in log  # its line ends at the folder name's newline, escaped
    assert "wrote: \"12:00:00 login: 'mallory'/agents.db" in log  # the next: no forged line


async def test_a_spare_app_that_could_not_start_costs_no_tab(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The app started ahead fails (here the first one, which cannot be taken over: it has
    no pipes): the tab that takes it gets an app started for it, one log line says why,
    and the next tab's spare is started all the same."""
    first = subprocess.Popen(["true"])
    spare = Spare(first)
    spare.fill()
    apps = []
    try:
        apps.append(await spare.take())  # the failed spare's tab: an app of its own
        apps.append(await spare.take())  # the next tab: the spare started meanwhile
        assert [app.returncode for app in apps] == [None, None]
        assert caplog.text.count("failed to start") == 1
    finally:
        for app in apps:
            await end_app(app)
        await spare.close()
        first.wait()


def test_an_unreadable_revocation_file_is_logged_once_per_change(
    database: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each request and the 2-second watcher look at the file: while it cannot be read,
    the logins it revoked stay revoked and the log says so once, not at every look."""
    path = tmp_path / "serve-revoked-logins"
    path.write_text("web:0123abcd\n")
    access = Access(make_config(database, revocations=path))
    assert access.revoked == {"web:0123abcd"}
    path.unlink()
    path.mkdir()  # cannot be read as a file (root reads a mode 000 file all the same)
    for _ in range(3):
        assert access.revoked == {"web:0123abcd"}
    assert caplog.text.count("cannot read the revocation file") == 1
    path.rmdir()
    path.write_text("web:0123abcd\nweb:4567cdef\n")
    assert access.revoked == {"web:0123abcd", "web:4567cdef"}
