"""Previewing a correction: only reads. Returns the :class:`Impact` — the rollback tier, the
affected decisions and child plans (with what each will get), the resources, the irreversible
side effects downstream, the phase change and the warnings — or refuses with the reason and
the options that remain (docs/corrections.md).

In two parts (issue 19): one snapshot of the plan, read in one transaction
(engine/correct/snapshot.py), and the impact worked out from it by a pure function
(engine/correct/assess.py)."""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import replace
from pathlib import Path

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CorrectionMode, Phase
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.engine.correct import snapshot as snapshots
from cleveragents_tui.engine.correct.append import plan_append
from cleveragents_tui.engine.correct.assess import (
    admitted,
    guidance_line,
    impact_of,
    tier_of,
    with_warnings,
)
from cleveragents_tui.engine.correct.guidance import Alternatives
from cleveragents_tui.engine.correct.model import (
    CorrectionRefusedError,
    CorrectionRequest,
    Impact,
    IrreversibleEffect,
    Tier,
)
from cleveragents_tui.store.store import Store

__all__ = ["guidance_line", "outside_refusal", "preview", "replay_blocker", "with_warnings"]


def preview(
    store: Store,
    decision_ref: str,
    mode: CorrectionMode,
    guidance: str,
    plan_ref: str | None = None,
    choose: int | None = None,
    sandbox_base: Path | None = None,
) -> Impact:
    """What correcting the decision would do. Changes nothing. ``choose``: the alternative
    (1-based) the replay takes, named by the user instead of selected by the guidance;
    ``sandbox_base``: the sandbox folder ``execute`` will use (its RunOptions')."""
    if not guidance.strip():
        raise CorrectionRefusedError(
            "the guidance is empty", 'say what the decision should be: --guidance "..."'
        )
    request = CorrectionRequest(decision_ref, mode, guidance, plan_ref, choose, sandbox_base)
    snapshot = snapshots.load(store, request)
    if mode is CorrectionMode.REVERT:
        return impact_of(snapshot, mode, guidance, choose)
    found = admitted(snapshot, mode, guidance, choose)
    appended = _append_impact(store, snapshot.plan, snapshot.decision, guidance, found)
    return with_warnings(replace(appended, tier=tier_of(snapshot)))


def replay_blocker(store: Store, plan_id: str) -> tuple[str, str] | None:
    """Why the plan cannot be run again, as (problem, fix), or None when it can.

    Every correction ends in a run (a revert replays the plan, an append runs a child plan
    of the same action), so a plan that cannot run cannot be corrected at all: this is asked
    before anything changes. It loads what :class:`PlanRunner` loads to start: the stored
    action (a recorded sample loaded by `agents demo-data` has none) and the profile.
    """
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        definition = None
        with contextlib.suppress(UserError):
            definition = uow.plan_actions.get(plan_id)
        return snapshots.replayable(store, uow, plan, definition)[1]


def _append_impact(
    store: Store, plan: Plan, decision: Decision, guidance: str, found: Alternatives | None
) -> Impact:
    """An append supersedes nothing, cancels nothing, rolls nothing back: its impact is the
    appended plan (engine/correct/append.py) and the irreversible effects its work repeats."""
    if plan.phase is Phase.STRATEGIZE:
        raise CorrectionRefusedError(
            f"plan {plan.plan_id} is still in Strategize: nothing has run that a corrective "
            "plan could build on",
            f'correct the decision itself: agents plan correct {decision.decision_id} --mode=revert --guidance "..."',
        )
    appended = plan_append(store, plan, decision, guidance, found.option if found else None)
    counts = Counter(c.tool for c in appended.irreversible_calls)
    effects = {c.tool: c.side_effects for c in appended.irreversible_calls}
    return Impact.bare(
        plan,
        decision,
        CorrectionMode.APPEND,
        guidance,
        Tier.FULL,
        irreversible=tuple(IrreversibleEffect(t, n, effects[t]) for t, n in sorted(counts.items())),
        alternatives=found,
        append=appended,
    )


def outside_refusal(impact: Impact) -> CorrectionRefusedError:
    """Refuses a revert that would roll back files changed outside the plan while no one
    said to keep or discard them (``--yes`` confirms warnings, it never chooses this)."""
    count = sum(len(c.paths) for c in impact.outside_changes)
    where = "; ".join(c.summary() for c in impact.outside_changes)
    return CorrectionRefusedError(
        f"the revert would roll back {counted(count, 'file')} changed outside the plan ({where})",
        "keep them on top of the rolled-back state with --outside-changes=keep, or discard "
        "them with --outside-changes=discard",
    )
