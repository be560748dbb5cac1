"""Two corrections of one plan at once: exactly one runs, the other gets a clear line."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.domain.errors import ConcurrentChangeError, UserError
from cleveragents_tui.engine.actions import load_action
from cleveragents_tui.engine.correction import _take_plan, execute, preview
from cleveragents_tui.engine.demo import build_demo
from cleveragents_tui.engine.runner import RunOptions, start_plan
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
    _take_plan(store, first, "maria")  # the first correction has the plan
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


RUN_AND_STAY = """
import sys
from pathlib import Path
from cleveragents_tui.engine.actions import load_action
from cleveragents_tui.engine.demo import build_demo
from cleveragents_tui.engine.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store

store = Store.open(sys.argv[1])
demo = build_demo(store, Path(sys.argv[2]))
options = RunOptions(sandbox_base=Path(sys.argv[3]))
plan = start_plan(store, load_action(str(demo.action_file)), profile_override="auto", options=options)
print(plan.plan_id, flush=True)
sys.stdin.read()  # stays open, holding the plan's database transaction, like an app window
"""


def test_a_correction_cannot_take_a_database_another_live_process_holds(
    store: Store, db_url: str, tmp_path: Path
) -> None:
    """The app that ran Execute holds the database sandbox's transaction while it is open; a
    revert from another process is refused before it takes the plan, and leaves it as it
    was (not errored). Once that process is gone, the transaction is replayed and the
    revert goes through."""
    base = tmp_path / "sandboxes"
    app = subprocess.Popen(
        [sys.executable, "-c", RUN_AND_STAY, db_url, str(tmp_path / "demo"), str(base)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert app.stdout is not None
    plan_id = app.stdout.readline().strip()
    options = RunOptions(sandbox_base=base)
    with store.unit_of_work() as uow:
        [announce] = [d for d in uow.decisions.for_plan(plan_id) if d.step_key == "announce"]
        before = uow.plans.get(plan_id)
    impact = preview(store, announce.decision_id, CorrectionMode.REVERT, "louder")
    try:
        with pytest.raises(UserError, match=rf"is held by process {app.pid}, still running"):
            execute(store, impact, acknowledged=True, requested_by="li", options=options)
        with store.unit_of_work() as uow:
            assert uow.plans.get(plan_id) == before
            assert uow.corrections.for_plan(plan_id) == []
    finally:
        app.communicate("")
    result = execute(store, impact, acknowledged=True, requested_by="li", options=options)
    assert result.correction.status.value == "succeeded"
