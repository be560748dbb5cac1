"""The checks made before anything listens: addresses, the public URL and its origin,
tokens, the users file, logins. Pure functions and files: no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.web.addresses import is_loopback, normalise_public_url
from cleveragents_tui.web.config import ServeConfig
from cleveragents_tui.web.credentials import add_user, read_users
from cleveragents_tui.web.logins import Logins, login_key
from tests.web.conftest import TOKEN


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LocalHost", True),
        ("0.0.0.0", False),  # noqa: S104 - a value under test
        ("", False),
        ("10.0.0.5", False),
        ("localhost.evil.example", False),
    ],
)
def test_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("raw", "url", "origin"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("https://Agents.Example.com/", "https://agents.example.com", "https://agents.example.com"),
        ("https://x.example:443/agents/", "https://x.example/agents", "https://x.example"),
        ("http://x.example:80", "http://x.example", "http://x.example"),
        ("http://[::1]:9000", "http://[::1]:9000", "http://[::1]:9000"),
    ],
)
def test_public_url_and_its_origin(raw: str, url: str, origin: str) -> None:
    assert normalise_public_url(raw) == (url, origin)


@pytest.mark.parametrize(
    "raw",
    ["agents.example.com", "ws://x", "http://", "http://x?y=1", "http://x#f", "http://x:99999"],
)
def test_unusable_public_urls(raw: str) -> None:
    with pytest.raises(UserError, match="is not an http"):
        normalise_public_url(raw)


def build(**options: object) -> ServeConfig:
    return ServeConfig.build(host="127.0.0.1", port=8000, database_url="x.db", **options)  # type: ignore[arg-type]


def test_loopback_without_a_token_gets_a_new_one_each_time() -> None:
    first, second = build(), build()
    assert first.shared_token and second.shared_token
    assert first.shared_token != second.shared_token and len(first.shared_token) >= 40
    assert first.credentials.identify(first.shared_token) == (True, None)
    assert first.credentials.identify(second.shared_token) == (False, None)
    assert first.origin == "http://127.0.0.1:8000" and not first.secure


def test_users_and_a_shared_token_together(tmp_path: Path) -> None:
    users = tmp_path / "team.users"
    alice, bob = add_user(users, "alice"), add_user(users, "bob@example.com")
    config = build(users=users, token=TOKEN, public_url="https://agents.example.com")
    assert config.secure and config.shared_token == TOKEN
    assert config.credentials.identify(alice) == (True, "alice")
    assert config.credentials.identify(bob) == (True, "bob@example.com")
    assert config.credentials.identify(TOKEN) == (True, None)
    assert config.credentials.identify(alice + "x") == (False, None)
    assert build(users=users).shared_token is None


def test_an_empty_users_file_and_no_token_is_refused(tmp_path: Path) -> None:
    users = tmp_path / "team.users"
    users.write_text("# nobody yet\n")
    with pytest.raises(UserError, match="lists nobody"):
        build(users=users)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("alice 123\n", "team.users:1 is not a 'NAME sha256:HEX' line"),
        (f"alice sha256:{'a' * 64}\nalice sha256:{'b' * 64}\n", "team.users:2 repeats"),
        (f"web:x sha256:{'a' * 64}\n", "user name 'web:x' is not allowed"),
    ],
)
def test_users_file_errors_name_the_line(tmp_path: Path, content: str, problem: str) -> None:
    users = tmp_path / "team.users"
    users.write_text(content)
    with pytest.raises(UserError, match=problem):
        read_users(users)


def test_add_user_keeps_a_file_without_a_final_newline_readable(tmp_path: Path) -> None:
    users = tmp_path / "team.users"
    users.write_text(f"alice sha256:{'a' * 64}")  # hand-edited, no final newline
    add_user(users, "bob")
    assert [name for _, name in read_users(users)] == ["alice", "bob"]


def test_logins_are_bounded_and_forget_the_oldest() -> None:
    here = "127.0.0.1"
    logins = Logins(limit=2)
    first, _ = logins.open("alice", here)
    second, anonymous = logins.open(None, here)
    third, _ = logins.open("bob", here)
    assert logins.user(first, here) is None  # forgotten: its tab logs in again with the token
    assert logins.user(second, here) == (login_key(second), anonymous)
    assert anonymous.startswith("web:")
    assert logins.user(third, here) == (login_key(third), "bob")
    assert logins.user(None, here) is None and logins.user("forged", here) is None


def test_logins_end_when_idle_and_at_their_lifetime_and_elsewhere() -> None:
    """Hours on a clock the test moves: idle ends a login nobody uses; the lifetime ends
    even one in use (an open tab); a cookie from another address is not the login."""
    now = [0.0]
    logins = Logins(idle=10.0, lifetime=100.0, clock=lambda: now[0])
    idle, _ = logins.open("alice", "10.0.0.1")
    busy, _ = logins.open("bob", "10.0.0.1")
    assert logins.user(idle, "10.0.0.2") is None  # copied to another machine
    now[0] = 9.0
    assert logins.user(busy, "10.0.0.1") is not None
    now[0] = 15.0
    assert logins.user(idle, "10.0.0.1") is None  # unused for 15 > 10
    assert logins.alive(login_key(busy), in_use={login_key(busy)})  # a tab is open
    now[0] = 101.0
    assert not logins.alive(login_key(busy), in_use={login_key(busy)})
