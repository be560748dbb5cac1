"""Small read services the interactive app needs: a cheap change fingerprint for live
refresh, a plan's tree rows (all, or those recorded since the ones shown), the recent events
of a plan (what is it doing right now), a decision's checkpoint group, and replay progress.
Read-only; no Textual here.
"""

from __future__ import annotations

from dataclasses import dataclass

from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.engine.read.browse import naming_replacements
from cleveragents_tui.store.app_queries import CallView as CallView  # the app's types
from cleveragents_tui.store.app_queries import EventView as EventView
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
    calls: list[CallView]  # of the decisions from the sequence number asked for on


def fingerprint(store: Store) -> tuple[object, ...]:
    """A tuple that changes whenever a plan, decision, approval, correction or event is
    added or changed. One round trip of aggregate queries; cheap enough to poll every 2 s."""
    with store.unit_of_work() as uow:
        return uow.app.fingerprint()


@dataclass(frozen=True)
class TreeRead:
    """A plan's tree rows as one transaction saw them."""

    plan: Plan
    rows: list[TreeRow]  # in sequence order, superseded ones included
    counts: tuple[int, int]  # the plan's (all, current) decisions, in the same snapshot
    checkpoints: frozenset[str]  # the plan's decisions with checkpoints


def tree_read(
    store: Store,
    plan_id: str,
    show_superseded: bool,
    *,
    first: int | None = None,
    after: int | None = None,
) -> TreeRead:
    """The plan's tree rows: only the ``first`` recorded, or only those recorded after
    sequence number ``after`` (the rows a shown tree lacks), when given. Decisions are
    append-only and superseded once, so ``counts`` tell a reader holding the rest whether
    anything but appends changed (docs/benchmarks.md, "tui")."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        counts = uow.decisions.counts([plan_id]).get(plan_id, (0, 0))
        rows = uow.decisions.tree_rows(plan_id, include_superseded=True, first=first, after=after)
        checkpoints = uow.checkpoints.decisions_with_checkpoints(plan_id)
        if show_superseded and any(r.superseded_by is not None for r in rows):
            rows = naming_replacements(rows, uow.decisions.replacements(plan_id))
    return TreeRead(plan, rows, counts, checkpoints)


def recent_events(store: Store, plan_id: str | None = None, limit: int = 8) -> list[EventView]:
    """The newest events (of one plan, or of all), newest first."""
    with store.unit_of_work() as uow:
        return uow.app.recent_events(plan_id, limit)


def progress_start(store: Store, plan_id: str) -> tuple[int, int]:
    """Where a replay's progress starts: the last event id, and the plan's next decision's
    sequence number (its calls and later ones' are the replay's)."""
    with store.unit_of_work() as uow:
        return uow.app.last_event_id(), uow.decisions.next_sequence_number(plan_id)


def progress(store: Store, plan_id: str, after_event_id: int, calls_from: int) -> Progress:
    """The plan's state, its events after ``after_event_id`` and the tool calls of its
    decisions from sequence number ``calls_from`` on."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        total, current = uow.decisions.counts([plan_id]).get(plan_id, (0, 0))
        events = uow.app.events_since(plan_id, after_event_id)
        calls = uow.app.calls_since(plan_id, calls_from)
    return Progress(plan.state.value, plan.phase.value, plan.attempt, total, current, events, calls)


def checkpoint_group(store: Store, plan_id: str, decision_id: str) -> CheckpointGroup | None:
    with store.unit_of_work() as uow:
        return uow.checkpoints.group_of(plan_id, decision_id)


def child_plan_of(store: Store, decision_id: str) -> str | None:
    """The child plan a ``subplan_spawn`` decision spawned, if it spawned one."""
    with store.unit_of_work() as uow:
        plan_id = uow.decisions.get(decision_id).plan_id
        children = uow.plans.children(plan_id)
    return next((c.plan_id for c in children if c.spawning_decision_id == decision_id), None)
