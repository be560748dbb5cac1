"""What a running plan has done since a reader last looked: the decisions it recorded, the
tool calls they made and the events it logged, its child plans' included. The CLI prints
them as progress lines while a plan runs or a correction replays (cli/progress.py);
read-only, safe from any thread.

Decisions are followed by sequence number, events by event id: a plan has one runner at a
time (the run lease), so both are committed in order and none is passed over. Calls are
recorded after their decision, as each ends: a :class:`CallCursor` reads the calls of the
decisions from the last one that made a call on, and leaves out those taken already.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime

from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.engine.core.in_flight import Wait, waits
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


@dataclass(frozen=True)
class Waiting:
    """A followed plan (of ``action``) waiting on a model's reply or a tool call now."""

    plan_id: str
    action: str
    wait: Wait


@dataclass
class CallCursor:
    """Where a reader of one plan's tool calls is (the CLI's progress, the app's replay
    log). A plan's runner makes its calls in order, so once a decision made one, the earlier
    decisions' are done: only the calls of decisions from ``from_sequence`` on are read
    again, and of those the ones in ``taken`` are left out."""

    from_sequence: int
    taken: dict[str, int] = field(default_factory=dict)  # call id: its decision's number

    def take(self, call: CallView) -> bool:
        """True the first time ``call`` is offered; the cursor moves up to its decision."""
        if call.invocation_id in self.taken:
            return False
        if call.sequence_number > self.from_sequence:
            self.from_sequence = call.sequence_number
            kept = self.taken.items()
            self.taken = {i: n for i, n in kept if n >= call.sequence_number}
        self.taken[call.invocation_id] = call.sequence_number
        return True

    def copy(self) -> CallCursor:
        return CallCursor(self.from_sequence, dict(self.taken))


@dataclass
class _Followed:
    action: str
    after_sequence: int  # the last decision seen
    calls: CallCursor


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
            made = CallCursor(last)  # the calls its last decision made already are not news
            for call in uow.app.calls_since(plan.plan_id, last):
                made.take(call)
        with self._lock:
            self._plans.setdefault(plan.plan_id, _Followed(plan.action, last, made))
        return plan.plan_id

    def waiting(self) -> list[Waiting]:
        """What the followed plans wait on now (their runners in this process)."""
        with self._lock:
            actions = {p: f.action for p, f in self._plans.items()}
        return [Waiting(p, actions[p], w) for p, w in waits(actions).items()]

    def news(self) -> list[Happened]:
        """What the followed plans did since the last call, oldest first."""
        with self._lock:
            plans = {
                p: _Followed(f.action, f.after_sequence, f.calls.copy())
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
                spawned = {  # every decision and call
                    child: _Followed(str(event.payload.get("action")), -1, CallCursor(-1))
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
                    Happened(c.created_at, plan_id, followed.action, call=c)
                    for c in uow.app.calls_since(plan_id, followed.calls.from_sequence)
                    # a later decision's (another statement's snapshot on PostgreSQL) waits
                    # for its decision's line
                    if c.sequence_number <= followed.after_sequence and followed.calls.take(c)
                )
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
