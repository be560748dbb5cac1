"""``agents serve`` as a command: what it refuses before listening (one line, exit code 2),
the users file it writes, and a real start, login and stop."""

from __future__ import annotations

import socket
import stat
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cleveragents_tui.cli import cli
from cleveragents_tui.web.credentials import read_users
from tests.web.conftest import TOKEN
from tests.web.serve_process import free_port, start_serve


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(
        cli, ["--db", str(tmp_path / "agents.db"), "serve", *args], env=env or {}
    )


def one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert all(fragment in lines[0] for fragment in fragments), lines[0]
    assert "Traceback" not in result.output


ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - what the command must refuse


@pytest.mark.parametrize("host", [ALL_INTERFACES, "192.0.2.10", "::", "build-box.example"])
def test_a_network_bind_without_a_token_refuses_to_start(tmp_path: Path, host: str) -> None:
    result = serve(tmp_path, "--host", host, env={"AGENTS_SERVE_TOKEN": ""})
    one_line_error(result, f"--host {host} is reachable from the network", "--token")


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--host", ALL_INTERFACES, "--token", TOKEN], ["every interface", "--public-url"]),
        (["--token", "short"], ["too short"]),
        (["--token", "not a token at all!"], ["letters, digits"]),
        (["--public-url", "ftp://x"], ["--public-url 'ftp://x'"]),
        (["--public-url", "http://u:p@x/"], ["is not an http(s) address"]),
        (["--users", "missing.users"], ["cannot read the users file"]),
        (["--add-user", "alice"], ["--add-user needs --users FILE"]),
    ],
)
def test_bad_options_are_one_line(tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    one_line_error(serve(tmp_path, *args), *fragments)


def test_add_user_writes_a_private_file_of_digests(tmp_path: Path) -> None:
    users = tmp_path / "team.users"
    result = serve(tmp_path, "--users", str(users), "--add-user", "alice")
    assert result.exit_code == 0, result.output
    url = result.stdout.strip().splitlines()[-1]
    assert url.startswith("http://127.0.0.1:8000/?token=")
    token = url.split("token=", 1)[1]
    assert token not in users.read_text()  # stored as its SHA-256 only
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    [(_, name)] = read_users(users)
    assert name == "alice"
    one_line_error(serve(tmp_path, "--users", str(users), "--add-user", "alice"), "already in")
    one_line_error(serve(tmp_path, "--users", str(users), "--add-user", "a b"), "not allowed")


def test_a_busy_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve(tmp_path, "--port", str(port))
    one_line_error(result, f"cannot listen on 127.0.0.1:{port}", "--port")


def test_start_print_the_login_url_and_stop(tmp_path: Path) -> None:
    """A real process: a token is generated and printed; the URL logs in; SIGTERM stops it."""
    port = free_port()
    database = str(tmp_path / "agents.db")
    no_token = {"AGENTS_SERVE_TOKEN": ""}  # (an empty variable counts as unset)
    process, first = start_serve(database, port, workdir=tmp_path, env=no_token)
    try:
        assert f"at http://127.0.0.1:{port}/" in first and "up to 8 sessions" in first
        opened = process.next_line()
        assert opened.startswith(f"open: http://127.0.0.1:{port}/?token=")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/")
        assert refused.value.code == 401
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
        with browser.open(opened.removeprefix("open: ")) as page:  # redirected, with the cookie
            assert page.status == 200 and page.url == f"http://127.0.0.1:{port}/"
    finally:
        assert process.stop() == 0
    assert "login: 'web:" in process.stderr()
