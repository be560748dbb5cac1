"""Fixtures for the app's tests: the demo plan run to its Apply gate on real resources."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.worker import WorkerCancelled

from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.demo.demo import DemoEnvironment, build_demo
from cleveragents_tui.engine.read.browse import plan_tree
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp

SIZE = (140, 40)


@dataclass
class DemoPlan:
    store: Store
    env: DemoEnvironment
    plan: Plan
    options: RunOptions

    def decision(self, chosen: str) -> str:
        tree = plan_tree(self.store, self.plan.plan_id)
        return next(line.row.decision_id for line in tree.lines if line.row.chosen_option == chosen)

    def app(self, **kwargs: object) -> AgentsApp:
        return AgentsApp(
            self.store,
            user="tester",
            run_options=self.options,
            poll_seconds=None,  # tests call app.poll_store() themselves: no timers
            **kwargs,  # type: ignore[arg-type]
        )


@pytest.fixture
def options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunOptions:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


@pytest.fixture
def demo_plan(tmp_path: Path, sqlite_store: Store, options: RunOptions) -> DemoPlan:
    env = build_demo(sqlite_store, tmp_path / "demo")
    plan = start_plan(
        sqlite_store, load_action(str(env.action_file)), profile_override="auto", options=options
    )
    return DemoPlan(sqlite_store, env, plan, options)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def settle(app: App[None], pilot: Pilot[None]) -> None:
    """Until the app's workers are done and their messages handled: the app reads the
    store in thread workers, and an exclusive worker a newer one replaced counts as
    cancelled (its reading is simply not used)."""
    for _ in range(3):
        with contextlib.suppress(WorkerCancelled):
            await app.workers.wait_for_complete()
        await pilot.pause()


SCREEN_TRIES = 2000  # pauses of 0.01 s: a bound on a failure, never reached in a passing run


async def until_screen(app: App[None], pilot: Pilot[None], kind: Any) -> None:
    """Until the screen shown is a ``kind``. A dialog's worker awaits its answer, so the
    app's workers never all end while it is up and :func:`settle` would wait for ever."""
    for _ in range(SCREEN_TRIES):
        if isinstance(app.screen, kind):
            return
        await pilot.pause(0.01)
    raise AssertionError(f"{kind} never shown: {app.screen!r}")
