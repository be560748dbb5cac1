"""Which child plans a parent's pause, resume and cancel reach (engine/run/with_children.py).

The whole flow — a running child that stops after its step, and `agents plan run` going on
as an uninterrupted run — is in tests/e2e/test_pause_with_children.py; here, each kind of
child a family can hold, in one store: running, not yet started, paused on its own,
waiting at its gate, and a grandchild; on SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text

from cleveragents_tui.domain.approval import Approval, ApprovalKind
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.run.lifecycle import cancel_plan, pause_plan
from cleveragents_tui.engine.run.with_children import resume_children
from cleveragents_tui.store.store import Store
from tests.support.statements import sent_statements


@dataclass
class Family:
    parent: str
    running: str
    not_started: str
    paused_alone: str
    at_its_gate: str
    grandchild: str


def _parent() -> tuple[Plan, Decision]:
    """A running plan and the decision its children name as their spawn."""
    parent = Plan(action="local/parent", phase=Phase.EXECUTE, state=PlanState.RUNNING)
    spawn = Decision(
        plan_id=parent.plan_id,
        sequence_number=0,
        decision_type="prompt_definition",
        phase=Phase.STRATEGIZE,
        question="goal?",
        chosen_option="a family of plans",
    )
    return parent, spawn


def child(of: Plan, by: Decision, state: PlanState) -> Plan:
    return Plan(
        action="local/child",
        phase=Phase.EXECUTE,
        state=state,
        parent_plan_id=of.plan_id,
        spawning_decision_id=by.decision_id,
    )


def _family(store: Store) -> Family:
    parent, spawn = _parent()
    running = child(parent, spawn, PlanState.RUNNING)
    not_started = child(parent, spawn, PlanState.CREATED)
    paused_alone = child(parent, spawn, PlanState.PAUSED)
    at_its_gate = child(parent, spawn, PlanState.AWAITING_APPROVAL)
    grandchild = child(running, spawn, PlanState.RUNNING)
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(parent)
        uow.flush()
        uow.decisions.add(spawn)
        uow.flush()
        for plan in (running, not_started, paused_alone, at_its_gate):
            uow.plans.add(plan)
        uow.flush()
        uow.plans.add(grandchild)
        uow.flush()
        uow.events.append("plan_paused", {"from": "running"}, plan_id=paused_alone.plan_id)
        uow.approvals.add(
            Approval(
                plan_id=at_its_gate.plan_id,
                kind=ApprovalKind.SPAWN,
                question="go on?",
            )
        )
        uow.commit()
    return Family(
        parent.plan_id,
        running.plan_id,
        not_started.plan_id,
        paused_alone.plan_id,
        at_its_gate.plan_id,
        grandchild.plan_id,
    )


def _states(store: Store) -> dict[str, PlanState]:
    with store.unit_of_work() as uow:
        return {p.plan_id: p.state for p in uow.plans.all()}


def _actors(store: Store, plan_id: str, kind: str) -> list[str | None]:
    with store.engine.connect() as connection:
        rows = connection.execute(
            text("SELECT actor FROM events WHERE plan_id = :p AND kind = :k ORDER BY event_id"),
            {"p": plan_id, "k": kind},
        )
        return [actor for (actor,) in rows]


def test_a_pause_reaches_the_running_and_not_yet_started_children_and_its_resume_undoes_it(
    store: Store,
) -> None:
    family = _family(store)
    pause_plan(store, family.parent, by="ann")
    states = _states(store)
    assert states[family.parent] is PlanState.PAUSED
    assert states[family.running] is PlanState.PAUSED
    assert states[family.not_started] is PlanState.PAUSED
    assert states[family.grandchild] is PlanState.PAUSED
    assert states[family.at_its_gate] is PlanState.AWAITING_APPROVAL  # doing nothing
    assert _actors(store, family.grandchild, "plan_paused") == ["ann"]
    assert _actors(store, family.paused_alone, "plan_paused") == [None]  # untouched

    with store.unit_of_work(write=True) as uow:
        resume_children(uow, uow.plans.get(family.parent), "bob")
        uow.commit()
    states = _states(store)
    assert states[family.running] is PlanState.RUNNING
    assert states[family.grandchild] is PlanState.RUNNING
    assert states[family.not_started] is PlanState.CREATED  # its parent's run starts it
    assert states[family.paused_alone] is PlanState.PAUSED  # a person's pause stays
    assert _actors(store, family.running, "plan_resumed") == ["bob"]


def test_a_child_paused_on_its_own_after_its_parents_pause_stays_paused(
    store: Store,
) -> None:
    family = _family(store)
    pause_plan(store, family.parent)
    with store.unit_of_work(write=True) as uow:
        resume_children(uow, uow.plans.get(family.parent), None)
        uow.commit()
    pause_plan(store, family.running)  # a person pauses the child itself
    with store.unit_of_work(write=True) as uow:
        resume_children(uow, uow.plans.get(family.parent), None)
        uow.commit()
    assert _states(store)[family.running] is PlanState.PAUSED


def test_a_cancel_reaches_every_open_child_and_lapses_their_questions(
    store: Store,
) -> None:
    family = _family(store)
    cancel_plan(store, family.parent, by="ann")
    assert set(_states(store).values()) == {PlanState.CANCELLED}
    with store.unit_of_work() as uow:
        assert uow.approvals.pending(family.at_its_gate) == []
    assert _actors(store, family.at_its_gate, "plan_cancelled") == ["ann"]


def test_a_pause_reads_the_family_in_one_statement_whatever_its_size(store: Store) -> None:
    """Issue 22's rule: no read per plan. A pause of a plan with 4 children and one with 40
    send the same statements."""
    sent = []
    for size in (4, 40):
        parent, root = _parent()
        with store.unit_of_work(write=True) as uow:
            uow.plans.add(parent)
            uow.flush()
            uow.decisions.add(root)
            uow.flush()
            for _ in range(size):
                uow.plans.add(child(parent, root, PlanState.COMPLETED))
            uow.commit()
        with sent_statements(store.engine) as statements:
            pause_plan(store, parent.plan_id)
        sent.append(len(statements))
    assert sent[0] == sent[1], sent
