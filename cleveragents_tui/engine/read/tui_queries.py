"""Small read services the interactive app needs: a cheap change fingerprint for live
refresh, the recent events of a plan (what is it doing right now), a decision's checkpoint
group, and replay progress. Read-only; no Textual here.
"""

from __future__ import annotations

from dataclasses import dataclass

from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store.app_queries import EventView as EventView  # the app's type
from cleveragents_tui.store.store import Store


@dataclass(frozen=True)
class Progress:
    """Where a plan is while something runs on it (a replay): for a live progress display."""

    state: str
    phase: str
    attempt: int
    decisions: int
    current_decisions: int
    events: list[EventView]


def fingerprint(store: Store) -> tuple[object, ...]:
    """A tuple that changes whenever a plan, decision, approval, correction or event is
    added or changed. One round trip of aggregate queries; cheap enough to poll every 2 s."""
    with store.unit_of_work() as uow:
        return uow.app.fingerprint()


def plan(store: Store, plan_id: str) -> Plan:
    """The plan alone: a refresh whose decisions did not change reads only this."""
    with store.unit_of_work() as uow:
        return uow.plans.get(plan_id)


def decision_counts(store: Store, plan_id: str) -> tuple[int, int]:
    """(all, current) decisions of the plan: decisions are append-only and superseded once,
    so while these stay the same the plan's tree does too (a refresh need not re-read it)."""
    with store.unit_of_work() as uow:
        return uow.decisions.counts([plan_id]).get(plan_id, (0, 0))


def recent_events(store: Store, plan_id: str | None = None, limit: int = 8) -> list[EventView]:
    """The newest events (of one plan, or of all), newest first."""
    with store.unit_of_work() as uow:
        return uow.app.recent_events(plan_id, limit)


def events_since(store: Store, plan_id: str, after_event_id: int) -> list[EventView]:
    with store.unit_of_work() as uow:
        return uow.app.events_since(plan_id, after_event_id)


def last_event_id(store: Store) -> int:
    with store.unit_of_work() as uow:
        return uow.app.last_event_id()


def progress(store: Store, plan_id: str, after_event_id: int) -> Progress:
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        total, current = uow.decisions.counts([plan_id]).get(plan_id, (0, 0))
    return Progress(
        plan.state.value,
        plan.phase.value,
        plan.attempt,
        total,
        current,
        events_since(store, plan_id, after_event_id),
    )


def checkpoint_group(store: Store, plan_id: str, decision_id: str) -> CheckpointGroup | None:
    with store.unit_of_work() as uow:
        for group in uow.checkpoints.groups_for_plan(plan_id):
            if group.decision_id == decision_id:
                return group
    return None


def child_plan_of(store: Store, decision_id: str) -> str | None:
    """The child plan a ``subplan_spawn`` decision spawned, if it spawned one."""
    with store.unit_of_work() as uow:
        plan_id = uow.decisions.get(decision_id).plan_id
        children = uow.plans.children(plan_id)
    return next((c.plan_id for c in children if c.spawning_decision_id == decision_id), None)
