"""The decision that replaced a superseded one, named for a few decisions from the rows the
rule can name (``replacements_of``: `plan explain`, the preview refusing a superseded
decision) is the one the whole plan's reading names (``DecisionRepository.replacements``:
the tree) — after
corrections that re-make a step, replace a step with a new one, and correct a recorded plan
without step keys; on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.demo.demo_data import load_sample_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.replacement_queries import replacements_of
from cleveragents_tui.store.store import Store


def _current(store: Store, plan_id: str, step_key: str) -> str:
    with store.unit_of_work() as uow:
        return uow.decisions.current_steps(plan_id, {step_key})[step_key][0]


def _same_naming(store: Store, plan_id: str) -> int:
    """Both readings name the same replacement for every superseded decision, asked all
    together and one at a time; returns how many were named."""
    with store.unit_of_work() as uow:
        whole = uow.decisions.replacements(plan_id)
        together = uow.run(replacements_of, plan_id, list(whole))
        alone = {k: v for d in whole for k, v in uow.run(replacements_of, plan_id, [d]).items()}
        current = [d.decision_id for d in uow.decisions.for_plan(plan_id, include_superseded=False)]
        assert uow.run(replacements_of, plan_id, current) == {}  # none of them is superseded
    assert together == whole
    assert alone == whole
    for superseded, replacement in whole.items():  # the preview's snapshot reads it too
        with pytest.raises(UserError, match=f"already superseded by {replacement}"):
            preview(store, superseded, CorrectionMode.REVERT, "again")
    return len(whole)


def test_a_few_decisions_are_named_as_the_whole_plan_names_them(
    store: Store, tmp_path: Path
) -> None:
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    demo = build_demo(store, tmp_path / "demo")
    plan = start_plan(
        store, load_action(str(demo.action_file)), profile_override="auto", options=options
    )

    def correct(step_key: str, guidance: str) -> None:
        impact = preview(
            store, _current(store, plan.plan_id, step_key), CorrectionMode.REVERT, guidance
        )
        result = execute(store, impact, acknowledged=True, requested_by="t", options=options)
        assert result.correction.status.value == "succeeded"

    correct("record", "a patch release")  # the same step made again
    correct("correction:record", "a minor release")  # a correction of a correction
    correct("strategy", "use a greeter class")  # later steps replaced by new ones
    named = _same_naming(store, plan.plan_id)
    assert named >= 8

    sample = load_sample_plan(store)  # recorded: no step keys, corrections name what they fix
    assert _same_naming(store, sample) >= 1
