"""Shared fixtures: database URLs for a real SQLite file and a real PostgreSQL server.

A test that needs PostgreSQL skips with the reason when no server can be started locally,
and fails under CI (``CI=true``), where .ci/run installs it.
"""

from __future__ import annotations

import gc
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from cleveragents_tui.store.store import Store
from tests.support.postgres import PostgresServer, find_bindir

IN_CI = os.environ.get("CI", "").lower() == "true"


@pytest.fixture(autouse=True)
def _unfrozen_heap() -> Iterator[None]:
    """`plan correct` freezes the heap of the process it ends; in-process tests run on."""
    yield
    gc.unfreeze()


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    bindir = find_bindir()
    if bindir is None:
        _unavailable("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
        raise AssertionError("unreachable")
    server = PostgresServer(bindir)
    try:
        server.start()
    except Exception as exc:  # any failure to start is reported, then skipped or failed
        server.stop()
        _unavailable(f"PostgreSQL did not start: {exc}")
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    name = f"t_{secrets.token_hex(6)}"
    url = postgres_server.create_database(name)
    yield url
    postgres_server.drop_database(name)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return str(tmp_path / "agents.db")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same test on a SQLite file and on a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "agents.db")
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = Store.open(db_url)
    yield opened
    opened.close()


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    opened = Store.open(sqlite_url)
    yield opened
    opened.close()
