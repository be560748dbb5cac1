"""What a running plan has done since a reader last looked: the decisions it recorded, the
tool calls they made and the events it logged, its child plans' included. The CLI prints them as progress lines while a
plan runs or a correction replays (cli/progress.py); read-only, safe from any thread.

Decisions are followed by sequence number, events by event id: a plan has one runner at a
time (the run lease), so both are committed in order and none is passed over. Calls are
recorded after their decision, as each ends: each read takes the calls of the decisions
from the last one seen on, and leaves out those seen already.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime

from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.store.app_queries import AppQueries
from cleveragents_tui.store.app_queries import CallView as CallView  # a read's type
from cleveragents_tui.store.app_queries import EventView as EventView
from cleveragents_tui.store.store import Store

CHILD_SPAWNED = "child_spawned"  # its payload's ``child`` is followed from then on


@dataclass(frozen=True)
class Happened:
    """One decision recorded, one tool call made, or one event logged, by a followed plan
    (of ``action``)."""

    at: datetime
    plan_id: str
    action: str
    decision: TreeRow | None = None
    event: EventView | None = None
    call: CallView | None = None


@dataclass
class _Followed:
    action: str
    after_sequence: int  # the last decision seen
    calls_seen: frozenset[str] = field(default_factory=frozenset)  # its and later ones' calls


class RunWatch:
    """Follows plans from the moment each is named: :meth:`news` gives, oldest first, what
    they recorded since the last call. A child plan a followed plan spawns is followed too."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._plans: dict[str, _Followed] = {}
        with store.unit_of_work() as uow:
            self._after_event = uow.app.last_event_id()

    def follow(self, plan_ref: str) -> str:
        """Report the plan's decisions recorded from now on (called before its runner
        records any); a plan already followed keeps its place. ``plan_ref``: its id or a
        unique prefix; returns the id."""
        with self._lock:
            if plan_ref in self._plans:
                return plan_ref
        with self.store.unit_of_work() as uow:
            plan = uow.plans.get(uow.plans.resolve(plan_ref))
            last = uow.decisions.next_sequence_number(plan.plan_id) - 1
            made = frozenset(c.invocation_id for c in uow.app.calls_since(plan.plan_id, last))
        with self._lock:
            self._plans.setdefault(plan.plan_id, _Followed(plan.action, last, made))
        return plan.plan_id

    def news(self) -> list[Happened]:
        """What the followed plans did since the last call, oldest first."""
        with self._lock:
            plans = {
                p: _Followed(f.action, f.after_sequence, f.calls_seen)
                for p, f in self._plans.items()
            }
            after_event = self._after_event
        if not plans:
            return []
        happened: list[Happened] = []
        with self.store.unit_of_work() as uow:
            events: list[EventView] = []
            asking = list(plans)
            while asking:  # a child spawned: its events so far too, and its children's
                found = uow.app.events_of(asking, after_event)
                events.extend(found)
                spawned = {
                    child: _Followed(str(event.payload.get("action")), -1)  # every decision
                    for event in found
                    if event.kind == CHILD_SPAWNED
                    and isinstance(child := event.payload.get("child"), str)
                    and child not in plans
                }
                plans.update(spawned)
                asking = list(spawned)
            events.sort(key=lambda e: e.event_id)
            for plan_id, followed in plans.items():
                calls_from = followed.after_sequence
                for at, row in uow.app.recorded_since(plan_id, followed.after_sequence):
                    happened.append(Happened(at, plan_id, followed.action, decision=row))
                    followed.after_sequence = row.sequence_number
                happened.extend(self._calls(uow.app, plan_id, followed, calls_from))
        happened.extend(
            Happened(e.created_at, plan_id, plans[plan_id].action, event=e)
            for e in events
            if (plan_id := e.plan_id or "") in plans
        )
        with self._lock:
            for plan_id, followed in plans.items():
                self._plans[plan_id] = followed
            if events:
                self._after_event = events[-1].event_id
        # stable: a plan's decisions stay in sequence order, events in id order
        return sorted(happened, key=lambda h: h.at)

    @staticmethod
    def _calls(
        queries: AppQueries, plan_id: str, followed: _Followed, calls_from: int
    ) -> list[Happened]:
        """The calls not seen yet of the decisions from ``calls_from`` to the last one seen
        (a later decision's, which another statement's snapshot can show on PostgreSQL, wait
        for their decision's line)."""
        calls = [
            c
            for c in queries.calls_since(plan_id, calls_from)
            if c.sequence_number <= followed.after_sequence
        ]
        new = [c for c in calls if c.invocation_id not in followed.calls_seen]
        followed.calls_seen = frozenset(  # the next read's: the last decision's on
            c.invocation_id for c in calls if c.sequence_number >= followed.after_sequence
        )
        return [Happened(c.created_at, plan_id, followed.action, call=c) for c in new]
