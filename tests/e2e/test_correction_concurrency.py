"""Two corrections of one plan at once: exactly one runs, the other gets a clear line."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.domain.errors import ConcurrentChangeError, UserError
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.correct.execute import execute, take_plan
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store


@pytest.fixture
def announced(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, RunOptions]:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    demo = build_demo(store, tmp_path / "demo")
    plan = start_plan(
        store, load_action(str(demo.action_file)), profile_override="auto", options=options
    )
    with store.unit_of_work() as uow:
        [announce] = [d for d in uow.decisions.for_plan(plan.plan_id) if d.step_key == "announce"]
    return announce.decision_id, options


def test_a_correction_while_another_runs_is_told_the_plan_is_busy(
    store: Store, announced: tuple[str, RunOptions]
) -> None:
    decision_id, options = announced
    first = preview(store, decision_id, CorrectionMode.REVERT, "louder")
    second = preview(store, decision_id, CorrectionMode.REVERT, "quieter")
    take_plan(store, first, "maria")  # the first correction has the plan
    with pytest.raises(ConcurrentChangeError, match=r"is busy: correction .* is running"):
        execute(store, second, acknowledged=True, requested_by="li", options=options)


def test_two_corrections_racing_exactly_one_wins(
    store: Store, announced: tuple[str, RunOptions]
) -> None:
    decision_id, options = announced
    impacts = [
        preview(store, decision_id, CorrectionMode.REVERT, text) for text in ("louder", "quieter")
    ]

    def attempt(index: int) -> str:
        try:
            execute(
                store,
                impacts[index],
                acknowledged=True,
                requested_by=f"user{index}",
                options=options,
            )
        except UserError as exc:
            return f"refused: {exc}"
        return "corrected"

    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = sorted(pool.map(attempt, [0, 1]))
    assert outcomes[0] == "corrected"
    assert outcomes[1].startswith("refused: ")
    assert any(
        word in outcomes[1]
        for word in ("busy", "changed since the preview", "changing this database")
    )
    with store.unit_of_work() as uow:
        plan_id = uow.decisions.get(decision_id).plan_id
        corrections = uow.corrections.for_plan(plan_id)
    assert [c.status.value for c in corrections] == ["succeeded"]


# An app window: runs a plan to its Apply gate, prints the plan id, then stays open and idle
# (holding nothing between commands) and applies or corrects when told, printing the outcome.
APP_WINDOW = """
import json, sys
from pathlib import Path
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.run.lifecycle import apply_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store

url, base, what = sys.argv[1:4]
store = Store.open(url)
options = RunOptions(sandbox_base=Path(base))
if what == "demo":
    action = load_action(str(build_demo(store, Path(sys.argv[4])).action_file))
else:
    action = Action.model_validate_json(what)
plan = start_plan(store, action, profile_override="auto", options=options)
print(plan.plan_id, flush=True)
for line in sys.stdin:
    command, *rest = line.split(maxsplit=2)
    try:
        if command == "apply":
            done = apply_plan(store, plan.plan_id, "app", options)
            print(json.dumps([done.phase.value, done.state.value]), flush=True)
        elif command == "correct":
            impact = preview(store, rest[0], CorrectionMode.REVERT, rest[1].strip())
            result = execute(store, impact, acknowledged=True, requested_by="app", options=options)
            print(json.dumps([result.correction.status.value]), flush=True)
    except Exception as exc:
        print(json.dumps(["error", str(exc)]), flush=True)
"""


class AppWindow:
    """Another process that ran a plan and stays open, as an app window or browser tab does."""

    def __init__(self, db_url: str, base: Path, what: str, *extra: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", APP_WINDOW, db_url, str(base), what, *extra],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.plan_id = self.answer()

    def answer(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the app window ended (exit code {self.process.wait()})"
        return line.strip()

    def ask(self, command: str) -> list[str]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer: list[str] = json.loads(self.answer())
        return answer

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.communicate("")


def current(store: Store, plan_id: str) -> dict[str, Decision]:
    with store.unit_of_work() as uow:
        decisions = uow.decisions.for_plan(plan_id)
    return {d.step_key: d for d in decisions if d.superseded_by is None and d.step_key}


def test_a_tab_reverts_the_demo_while_the_window_that_ran_it_stays_open(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    """The window that ran the demo stays open; another process reverts the strategy, which
    rolls the app database back: it goes through. The window, still open, then applies: the
    database and the branch hold what the corrected tree says (a Greeter class, one release
    row), not what the window's first run left in its transaction."""
    base = tmp_path / "sandboxes"
    window = AppWindow(db_url, base, "demo", str(tmp_path / "demo"))
    try:
        strategy = current(store, window.plan_id)["strategy"]
        impact = preview(store, strategy.decision_id, CorrectionMode.REVERT, "a greeter class")
        assert any(r.endswith("/app-db") for r in impact.rollbackable)

        result = execute(
            store,
            impact,
            acknowledged=True,
            requested_by="li",
            options=RunOptions(sandbox_base=base),
        )

        assert result.correction.status.value == "succeeded"
        tree = current(store, window.plan_id)
        assert tree["strategy"].chosen_option.startswith("A greeter class")
        assert window.ask("apply") == ["apply", "applied"]
    finally:
        window.close()
    demo = tmp_path / "demo"
    releases = sqlite3.connect(demo / "app.db").execute("SELECT version FROM releases").fetchall()
    assert releases == [("1.0.0",), ("1.1.0",)]  # one row: the corrected tree records it once
    greet = subprocess.run(
        ["git", "show", f"cleveragents/apply/{window.plan_id}:hello_cli/greet.py"],
        cwd=demo / "hello-cli",
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "class Greeter" in greet


def _sql(version_or_what: str, table: str = "releases") -> dict[str, object]:
    return {
        "tool": "local/run-sql",
        "arguments": {
            "resource": "rel/app-db",
            "sql": f"INSERT INTO {table} ({'version' if table == 'releases' else 'what'}) "
            "VALUES (:value)",
            "params": {"value": version_or_what},
        },
    }


RELEASE = {
    "name": "rel/release",
    "prompt": "record the release",
    "resources": ["rel/app-db"],
    "decisions": [
        {
            "key": "plan",
            "type": "strategy_choice",
            "question": "How is it recorded?",
            "alternatives": [{"option": "a row and an audit line"}],
        },
        {
            "key": "record",
            "type": "implementation_choice",
            "parent": "plan",
            "question": "Which version?",
            "alternatives": [
                {"option": "a minor release 1.1.0", "tool_calls": [_sql("1.1.0")]},
                {"option": "a major release 2.0.0", "tool_calls": [_sql("2.0.0")]},
            ],
        },
        {
            "key": "audit",
            "type": "tool_invocation",
            "parent": "plan",
            "depends_on": ["record"],
            "question": "What does the audit say?",
            "alternatives": [
                {"option": "a short audit line", "tool_calls": [_sql("recorded", "audit")]},
                {
                    "option": "a detailed audit line",
                    "tool_calls": [_sql("recorded after review", "audit")],
                },
            ],
        },
    ],
}


@pytest.fixture
def release_db(store: Store, tmp_path: Path) -> Path:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE releases (id INTEGER PRIMARY KEY, version TEXT NOT NULL)")
        connection.execute("CREATE TABLE audit (id INTEGER PRIMARY KEY, what TEXT NOT NULL)")
        connection.execute("INSERT INTO releases (version) VALUES ('1.0.0')")
    connection.close()
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id="rel/app-db",
                kind="database",
                location=str(path),
                sandbox_strategy="transaction_rollback",
            )
        )
        uow.commit()
    return path


def test_the_window_that_ran_the_plan_corrects_and_applies_after_another_tab_corrected(
    store: Store, db_url: str, tmp_path: Path, release_db: Path
) -> None:
    """Another process corrects the release to 2.0.0 while the window that ran the plan stays
    open; the window then corrects the audit line and applies. The window works on the
    other tab's database state (the savepoint of the audit line it rolls back to was made by
    the other tab's replay) and lands exactly what the corrected tree says: neither its own
    first run's 1.1.0 nor a second copy of anything."""
    base = tmp_path / "sandboxes"
    window = AppWindow(db_url, base, json.dumps(RELEASE))
    try:
        record = current(store, window.plan_id)["record"]
        impact = preview(store, record.decision_id, CorrectionMode.REVERT, "a major release")
        assert impact.rollbackable == ("rel/app-db",)

        result = execute(
            store,
            impact,
            acknowledged=True,
            requested_by="li",
            options=RunOptions(sandbox_base=base),
        )

        assert result.correction.status.value == "succeeded"
        tree = current(store, window.plan_id)
        assert tree["record"].chosen_option == "a major release 2.0.0"
        audit = tree["audit"].decision_id
        assert window.ask(f"correct {audit} detailed") == ["succeeded"]
        assert window.ask("apply") == ["apply", "applied"]
    finally:
        window.close()
    with sqlite3.connect(release_db) as connection:
        releases = connection.execute("SELECT version FROM releases ORDER BY id").fetchall()
        audit_lines = connection.execute("SELECT what FROM audit").fetchall()
    connection.close()
    assert releases == [("1.0.0",), ("2.0.0",)]
    assert audit_lines == [("recorded after review",)]
