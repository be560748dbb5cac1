"""A correction's preview built by hand, for tests and benchmarks of how it is shown."""

from __future__ import annotations

from collections.abc import Sequence

from cleveragents_tui.domain.enums import CorrectionMode, Phase
from cleveragents_tui.engine.correct.model import Impact, Tier


def revert_impact(
    plan_id: str, affected: Sequence[str], *, phase: Phase, step_key: str, guidance: str
) -> Impact:
    """A full revert of ``affected[0]`` as the engine returns it: ``affected`` superseded
    and re-made, nothing else touched."""
    return Impact(
        plan_id=plan_id,
        plan_version=1,
        attempt=1,
        decision_id=affected[0],
        decision_phase=phase,
        step_key=step_key,
        mode=CorrectionMode.REVERT,
        guidance=guidance,
        tier=Tier.FULL,
        affected_decisions=tuple(affected),
        children=(),
        rollbackable=(),
        non_rollbackable=(),
        unaffected=(),
        irreversible=(),
        phase_change=None,
    )
