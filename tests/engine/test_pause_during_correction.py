"""A pause asked while a revert rolls the plan back holds: the correction is made, its
replay stops at once (paused), and `plan run` goes on with it. Before, the correction's
supersede step set the plan running again, and the replay ran to its end under the pause
(the app's "pause and quit" then waited for all of it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, PlanState
from cleveragents_tui.engine.correct import replay
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run.lifecycle import pause_plan, resume_plan
from tests.support.scale_plan import build


def test_a_pause_asked_during_the_rollback_stops_the_replay_and_plan_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scale = build(tmp_path, 12)
    rolled_back = replay._reasoning_rollback

    def paused_meanwhile(*args: object) -> None:  # the user pauses after the rollback
        pause_plan(scale.store, scale.plan_id)
        rolled_back(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(replay, "_reasoning_rollback", paused_meanwhile)
    try:
        impact = preview(
            scale.store, scale.ids[0], CorrectionMode.REVERT, "make it loud",
            sandbox_base=scale.options.sandbox_base,
        )  # fmt: skip
        result = execute(
            scale.store, impact, acknowledged=True, requested_by="test", options=scale.options
        )
        assert result.correction.status is CorrectionStatus.SUCCEEDED
        assert result.plan.state is PlanState.PAUSED
        assert result.plan.attempt == 2
        monkeypatch.undo()
        plan = resume_plan(scale.store, scale.plan_id, scale.options)
        assert (plan.state, plan.attempt) == (PlanState.AWAITING_APPROVAL, 2)
        with scale.store.unit_of_work() as uow:
            remade = [d for d in uow.decisions.for_plan(scale.plan_id) if d.is_correction]
        assert len(remade) > 1  # the guidance, and the decisions the resumed replay re-made
    finally:
        scale.store.close()
