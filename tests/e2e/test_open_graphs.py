"""A graph kept open (as the app keeps it) stays equal to the store through runs and corrections."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.correct import snapshot as snapshot_module
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.benchmarks.bench_impact import affected_subtree


@pytest.fixture
def opened(
    sqlite_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, RunOptions]]:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    demo = build_demo(sqlite_store, tmp_path / "demo")
    plan = start_plan(
        sqlite_store, load_action(str(demo.action_file)), profile_override="auto", options=options
    )
    OPEN_GRAPHS.open(sqlite_store, plan.plan_id)
    yield plan.plan_id, options
    OPEN_GRAPHS.close(plan.plan_id)


def test_the_open_graph_follows_a_correction_and_answers_previews(
    sqlite_store: Store, opened: tuple[str, RunOptions], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan_id, options = opened
    with sqlite_store.unit_of_work() as uow:
        strategy = next(d for d in uow.decisions.for_plan(plan_id) if d.step_key == "strategy")
    impact = preview(
        sqlite_store, strategy.decision_id, CorrectionMode.REVERT, "use a greeter class"
    )
    execute(sqlite_store, impact, acknowledged=True, requested_by="maria", options=options)

    graph = OPEN_GRAPHS.holding(plan_id)
    assert graph is not None
    with sqlite_store.unit_of_work() as uow:
        current = uow.decisions.for_plan(plan_id, include_superseded=False)
    assert any(d.step_key == "implement-class" for d in current)  # the replay was followed
    for decision in current:  # warm == cold for every current decision
        assert graph.affected(decision.decision_id) == affected_subtree(
            sqlite_store, decision.decision_id
        )

    def cold_path_not_used(*_: object) -> None:
        raise AssertionError("preview went to the store although the graph is open")

    monkeypatch.setattr(snapshot_module, "affected_subtree_in", cold_path_not_used)
    announce = next(d for d in current if d.step_key == "announce")
    assert preview(
        sqlite_store, announce.decision_id, CorrectionMode.REVERT, "later"
    ).affected_decisions
