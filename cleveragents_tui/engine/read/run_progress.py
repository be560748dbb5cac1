"""What a running plan has done since a reader last looked: the decisions it recorded and the
events it logged, its child plans' included. The CLI prints them as progress lines while a
plan runs or a correction replays (cli/progress.py); read-only, safe from any thread.

Decisions are followed by sequence number, events by event id: a plan has one runner at a
time (the run lease), so both are committed in order and none is passed over.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime

from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.store.app_queries import EventView as EventView  # a read's type
from cleveragents_tui.store.store import Store

CHILD_SPAWNED = "child_spawned"  # its payload's ``child`` is followed from then on


@dataclass(frozen=True)
class Happened:
    """One decision recorded, or one event logged, by a followed plan (of ``action``)."""

    at: datetime
    plan_id: str
    action: str
    decision: TreeRow | None = None
    event: EventView | None = None


@dataclass
class _Followed:
    action: str
    after_sequence: int  # the last decision seen


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
        with self._lock:
            self._plans.setdefault(plan.plan_id, _Followed(plan.action, last))
        return plan.plan_id

    def news(self) -> list[Happened]:
        """What the followed plans did since the last call, oldest first."""
        with self._lock:
            plans = {p: _Followed(f.action, f.after_sequence) for p, f in self._plans.items()}
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
                for at, row in uow.app.recorded_since(plan_id, followed.after_sequence):
                    happened.append(Happened(at, plan_id, followed.action, decision=row))
                    followed.after_sequence = row.sequence_number
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
