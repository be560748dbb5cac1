"""Fixtures of tests/reliability: the checkpoint-group world of tests/engine (real git, files,
SQLite and a ``none`` resource in their sandboxes) for the invariant checker's tests, and the
workers of the crash and fault loops with the demo plan run to its Apply gate once."""

from pathlib import Path

import pytest

from tests.engine.conftest import world
from tests.reliability.harness import Worker, on_each, workers

__all__ = ["team", "world"]


@pytest.fixture(scope="session")
def team(tmp_path_factory: pytest.TempPathFactory) -> list[Worker]:
    prepared = workers(Path(tmp_path_factory.mktemp("reliability")))
    on_each(prepared, Worker.prepare)
    return prepared
