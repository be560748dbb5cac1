"""Editing the strategy before Execute (behaviour spec, Human-in-the-Loop: "Editability").

A strategy is the plan's Strategize decisions. Editing one before Execute starts is a revert
correction of that decision with the new strategy as its guidance: history keeps the old
choice (superseded) and the edit (a user intervention); the strategy actor decides again
under the edit, and every gate — "Start Execute?" included — is asked again for the new
attempt. Nothing has been executed yet, so nothing needs rolling back.

Once Execute has started, the same change is an ordinary correction (it rolls Execute back);
this service refuses and says so, so that "edit before Execute" never hides a rollback.
"""

from __future__ import annotations

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CorrectionMode, Phase
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.correct.model import Impact
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.store.store import Store


class StrategyEditRefusedError(UserError):
    """The decision is not a strategy decision that can still be edited before Execute."""


def editable_strategy_decision(store: Store, decision_ref: str) -> Decision:
    """The Strategize decision ``decision_ref`` names, if its plan has not started Execute;
    :class:`StrategyEditRefusedError` otherwise."""
    with store.unit_of_work() as uow:
        decision = uow.decisions.get(uow.decisions.resolve(decision_ref))
        plan = uow.plans.get(decision.plan_id)
    correct_instead = (
        f"correct it instead: agents plan correct {decision.decision_id} --mode=revert "
        '--guidance "..."'
    )
    if decision.phase is not Phase.STRATEGIZE:
        raise StrategyEditRefusedError(
            f"decision {decision.decision_id} is an {decision.phase.value} decision, not part "
            "of the strategy",
            correct_instead,
        )
    if plan.phase is not Phase.STRATEGIZE or plan.state.is_terminal:
        raise StrategyEditRefusedError(
            f"plan {plan.plan_id} is {plan.phase.value} · {plan.state.value}: its strategy can "
            "only be edited before Execute starts",
            correct_instead + " (that rolls back what Execute did)",
        )
    return decision


def preview_strategy_edit(
    store: Store,
    decision_ref: str,
    new_strategy: str,
    plan_ref: str | None = None,
    choose: int | None = None,
) -> Impact:
    """The impact of replacing Strategize decision ``decision_ref`` with ``new_strategy``
    (run it with ``engine.correct.execute.execute``). Changes nothing. ``choose``: as for
    ``preview``."""
    decision = editable_strategy_decision(store, decision_ref)
    return preview(
        store, decision.decision_id, CorrectionMode.REVERT, new_strategy, plan_ref, choose
    )
