"""A preview's frozen dataclasses are built and copied without their ``__init__``
(engine/correct/model.py ``built`` and ``copied``, issue 22): the result must be what the
dataclass's own constructor and ``dataclasses.replace`` give, and a wrong field refused."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import pytest

from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.engine.core.impact import AffectedSubtree
from cleveragents_tui.engine.correct.model import (
    CorrectionRequest,
    Impact,
    Tier,
    built,
    copied,
)
from cleveragents_tui.engine.correct.snapshot import Snapshot, load
from tests.support.scale_plan import build


def test_copies_and_builds_are_the_dataclasses_own(tmp_path: Path) -> None:
    scale = build(tmp_path, 20)
    try:
        snapshot = load(
            scale.store,
            CorrectionRequest(
                scale.ids[0],
                CorrectionMode.REVERT,
                "make it loud",
                sandbox_base=scale.options.sandbox_base,
            ),
        )
    finally:
        scale.store.close()
    given = {f.name: getattr(snapshot, f.name) for f in fields(Snapshot)}
    assert built(Snapshot, given) == Snapshot(**given) == snapshot
    subtree = AffectedSubtree(frozenset({"x"}), frozenset())
    assert copied(snapshot, subtree=subtree, writes=()) == replace(
        snapshot, subtree=subtree, writes=()
    )
    assert copied(snapshot, subtree=subtree).subtree is subtree
    assert snapshot.subtree is not subtree  # the original is left as it was
    least = {f.name: getattr(snapshot, f.name) for f in fields(Snapshot) if f.name in _REQUIRED}
    made, own = built(Snapshot, least), Snapshot(**least)
    assert made == own
    assert made.child_plans is not built(Snapshot, least).child_plans  # a factory's, anew
    impact = Impact.bare(snapshot.plan, snapshot.decision, CorrectionMode.REVERT, "g", Tier.FULL)
    assert impact == Impact(
        plan_id=snapshot.plan.plan_id,
        plan_version=snapshot.plan.version,
        attempt=snapshot.plan.attempt,
        decision_id=snapshot.decision.decision_id,
        decision_phase=snapshot.decision.phase,
        step_key=snapshot.decision.step_key,
        mode=CorrectionMode.REVERT,
        guidance="g",
        tier=Tier.FULL,
        affected_decisions=(),
        children=(),
        rollbackable=(),
        non_rollbackable=(),
        unaffected=(),
        irreversible=(),
        phase_change=None,
    )
    assert copied(impact, warnings=("w",)) == replace(impact, warnings=("w",))
    with pytest.raises(TypeError, match="no field"):
        copied(impact, warning=("w",))
    with pytest.raises(TypeError, match="unknown"):
        Impact.bare(snapshot.plan, snapshot.decision, CorrectionMode.REVERT, "g", Tier.FULL, x=1)
    with pytest.raises(TypeError, match="missing"):
        built(Snapshot, {k: v for k, v in least.items() if k != "plan"})


_REQUIRED = {
    "decision",
    "plan",
    "resources",
    "used",
    "named",
    "action",
    "blocker",
    "current_steps",
}
