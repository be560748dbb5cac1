"""Fixtures of tests/reliability: the checkpoint-group world of tests/engine (real git, files,
SQLite and a ``none`` resource in their sandboxes) for the invariant checker's tests."""

from tests.engine.conftest import world

__all__ = ["world"]
