"""Fixtures for the browser mode: a demo plan in a real database, ``agents serve`` as a
real process, and Debian's Chromium (missing: skipped locally, a failure under CI=true)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.read.browse import plan_tree
from cleveragents_tui.engine.run.plans import ACTORS, create_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.web.browser import CHROMIUM, TIMEOUT_MS, VIEWPORT, launch
from tests.web.serve_process import ServeProcess, descendants, free_port, start_serve

IN_CI = os.environ.get("CI", "").lower() == "true"
TOKEN = "test-token-0123456789abcdef"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium per module: Playwright's sync API keeps an event loop running on this
    thread, which other modules' asyncio tests (and asyncio.run) must not find."""
    if not CHROMIUM.exists():
        reason = f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
        if IN_CI:
            pytest.fail(f"CI=true but {reason}", pytrace=False)
        pytest.skip(reason)
    with sync_playwright() as playwright:
        launched = launch(playwright)
        yield launched
        launched.close()


@pytest.fixture
def new_page(browser: Browser) -> Iterator[Callable[[], Page]]:
    """Pages, each in its own context: its own cookies, as another person's browser."""
    contexts: list[BrowserContext] = []

    def make() -> Page:
        context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        # every wait for the page (its load, a popup, a download, a redirect) is for a real
        # event, which a loaded machine delays: as long as a wait for the screen, not 30 s
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        return context.new_page()

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def page(new_page: Callable[[], Page]) -> Page:
    return new_page()


@dataclass
class Demo:
    """The demo plan, on a database the server and the test share."""

    database: str
    store: Store
    plan_id: str
    workdir: Path

    def decision(self, chosen: str) -> tuple[str, int]:
        """The decision that chose ``chosen``, and its row in the tree (0 = the root)."""
        lines = plan_tree(self.store, self.plan_id).lines
        index = next(i for i, line in enumerate(lines) if line.row.chosen_option == chosen)
        return lines[index].row.decision_id, index


def make_demo(
    database: str, workdir: Path, monkeypatch: pytest.MonkeyPatch, *, run: bool = True
) -> Iterator[Demo]:
    """The demo plan, run to its Apply gate — or only created (``run=False``), for a
    browser tab to run it (``R``)."""
    sandboxes = workdir / "sandboxes"
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(sandboxes))  # the server's tabs inherit it
    store = Store.open(database)
    action = load_action(str(build_demo(store, workdir / "demo").action_file))
    if run:
        options = RunOptions(sandbox_base=sandboxes)
        plan_id = start_plan(store, action, profile_override="auto", options=options).plan_id
    else:
        plan, _ = create_plan(
            store, action, tools=default_registry(), actors=ACTORS, profile_override="auto"
        )
        with store.unit_of_work(write=True) as uow:  # what start_plan stores before it runs
            uow.plan_actions.save(plan.plan_id, action.model_dump(mode="json"))
            uow.commit()
        plan_id = plan.plan_id
    yield Demo(database, store, plan_id, workdir)
    store.close()


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Demo]:
    yield from make_demo(str(tmp_path / "agents.db"), tmp_path, monkeypatch)


@dataclass
class Served:
    process: ServeProcess
    base: str  # the public URL, with its trailing slash

    def login(self, token: str = TOKEN) -> str:
        return f"{self.base}?token={token}"


def serve(demo: Demo, *args: str, env: dict[str, str] | None = None) -> Iterator[Served]:
    """``agents serve`` on the demo's database; stopped with SIGTERM afterwards, which must
    end every tab's app process too."""
    port = free_port()
    process, _ = start_serve(demo.database, port, *args, workdir=demo.workdir, env=env)
    try:
        yield Served(process, f"http://127.0.0.1:{port}/")
    finally:
        children = descendants(process.process.pid)
        code = process.stop()
        assert code == 0, process.stderr()
        assert not (children & descendants(1)), "app processes outlived agents serve"


@pytest.fixture
def served(demo: Demo) -> Iterator[Served]:
    """The shared token (given in the environment, as a team would)."""
    yield from serve(demo, env={"AGENTS_SERVE_TOKEN": TOKEN})
