"""Fixtures of the end-to-end scenarios: the demo on real resources, its own sandbox folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents_tui.engine.demo.demo import DemoEnvironment, build_demo
from cleveragents_tui.engine.run.runner import RunOptions
from cleveragents_tui.store.store import Store


@pytest.fixture
def options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunOptions:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


@pytest.fixture
def demo(tmp_path: Path, sqlite_store: Store) -> DemoEnvironment:
    return build_demo(sqlite_store, tmp_path / "demo")
