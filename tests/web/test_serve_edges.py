"""`agents serve` at its edges, as a real process on a real port: `--host ::` takes IPv4 and
IPv6 clients alike, and requests that anyone who reaches the port can send — a header past
aiohttp's limit, a websocket message that is not JSON — each leave one log line, never a
traceback."""

from __future__ import annotations

import base64
import http.client
import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cleveragents_tui.store.store import Store
from tests.web.serve_process import ServeProcess, free_port, start_serve

TOKEN = "edge-token-0123456789abcdef"


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = str(tmp_path / "agents.db")
    Store.open(url).close()
    return url


@pytest.fixture
def served(database: str, tmp_path: Path) -> Iterator[tuple[ServeProcess, int]]:
    port = free_port()
    process, _ = start_serve(database, port, "--token", TOKEN, workdir=tmp_path)
    try:
        yield process, port
    finally:
        process.stop()


def status(host: str, port: int, path: str = "/") -> int:
    connection = http.client.HTTPConnection(host, port, timeout=30)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.skipif(not socket.has_dualstack_ipv6(), reason="no dual-stack IPv6 here")
def test_host_wildcard_v6_listens_on_ipv4_and_ipv6(database: str, tmp_path: Path) -> None:
    port = free_port()
    process, line = start_serve(
        database,
        port,
        "--host",
        "::",
        "--public-url",
        f"http://127.0.0.1:{port}",
        "--token",
        TOKEN,
        workdir=tmp_path,
    )
    try:
        assert "listening on ::" in line
        assert status("127.0.0.1", port) == 401  # IPv4 reaches it (no token: refused)
        assert status("::1", port) == 401
    finally:
        assert process.stop() == 0


def raw_request(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(data)
        return connection.recv(200)


def masked_text_frame(payload: bytes) -> bytes:
    return bytes([0x81, 0x80 | len(payload)]) + b"\0\0\0\0" + payload  # zero mask


def test_bad_requests_leave_one_log_line_each(served: tuple[ServeProcess, int]) -> None:
    process, port = served
    huge_header = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
    huge_url = b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    assert b" 400 " in raw_request(port, huge_header)
    assert b" 400 " in raw_request(port, huge_url)

    login = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    login.request("GET", f"/?token={TOKEN}")
    answer = login.getresponse()
    cookie = (answer.getheader("Set-Cookie") or "").split(";")[0]
    login.close()
    assert answer.status == 303 and cookie
    key = base64.b64encode(os.urandom(16)).decode()
    origin = f"http://127.0.0.1:{port}"
    upgrade = (
        f"GET /ws?width=80&height=24 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: {origin}\r\n"
        f"Cookie: {cookie}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as tab:
        tab.sendall(upgrade)
        assert b" 101 " in tab.recv(200)
        tab.sendall(masked_text_frame(b"not json"))
        while tab.recv(4096):  # the server ends the session and closes the connection
            pass
    assert process.stop() == 0

    log = process.stderr()
    assert "Traceback" not in log, log
    errors = [line for line in log.splitlines() if "Error handling request" in line]
    assert len(errors) == 3, log
    assert sum("LineTooLong" in line for line in errors) == 2, log
    assert sum("JSONDecodeError" in line for line in errors) == 1, log
    assert all(len(line) < 400 for line in errors), errors
