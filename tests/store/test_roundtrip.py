"""model -> row -> model is the identity, on a SQLite file and on PostgreSQL."""

from __future__ import annotations

from datetime import datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cleveragents_tui.domain.checkpoint import CheckpointGroup, CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CheckpointType, SandboxStrategyName
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.tool import ToolInvocation
from cleveragents_tui.store.store import Store
from tests.strategies import decisions, moments, names, required, text
from tests.support.store_rows import add_groups, plan_groups

FIXTURE_OK = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _plan_with_root(store: Store) -> tuple[Plan, Decision]:
    plan = Plan(action="local/roundtrip")
    root = Decision(
        plan_id=plan.plan_id,
        sequence_number=0,
        decision_type="prompt_definition",
        phase="strategize",
        question="q",
        chosen_option="c",
    )
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.flush()
        uow.decisions.add(root)
        uow.commit()
    return plan, root


@FIXTURE_OK
@given(data=st.data())
def test_decision_round_trip(store: Store, data: st.DataObject) -> None:
    plan, root = _plan_with_root(store)
    decision = data.draw(decisions(plan.plan_id, root.decision_id, root.decision_id))
    with store.unit_of_work(write=True) as uow:
        uow.decisions.add(decision)
        uow.commit()
    with store.unit_of_work() as uow:
        assert uow.decisions.get(decision.decision_id) == decision
        assert uow.decisions.for_plan(plan.plan_id) == [root, decision]


@FIXTURE_OK
@given(
    title=st.none() | text,
    project=st.none() | text,
    created=moments,
    state=st.sampled_from(["created", "running", "paused", "completed", "errored", "cancelled"]),
    phase=st.sampled_from(["strategize", "execute"]),
    attempt=st.integers(1, 1000),
    profile=required,
    action=required,
)
def test_plan_round_trip(
    store: Store,
    title: str | None,
    project: str | None,
    created: datetime,
    state: str,
    phase: str,
    attempt: int,
    profile: str,
    action: str,
) -> None:
    parent, root = _plan_with_root(store)
    plan = Plan(
        action=action,
        title=title,
        project=project,
        phase=phase,
        state=state,
        attempt=attempt,
        parent_plan_id=parent.plan_id,
        spawning_decision_id=root.decision_id,
        automation_profile=profile,
        created_at=created,
        updated_at=created,
    )
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.commit()
    with store.unit_of_work() as uow:
        assert uow.plans.get(plan.plan_id) == plan


@FIXTURE_OK
@given(
    arguments=st.dictionaries(
        text, st.none() | st.integers(-(2**53), 2**53) | text | st.booleans(), max_size=4
    ),
    effects=st.lists(required, max_size=3),
    irreversible=st.booleans(),
    tool=required,
    resource=names,
    ref=required,
    at=moments,
    report=st.dictionaries(text, text, max_size=3),
)
def test_tool_checkpoint_and_correction_round_trip(
    store: Store,
    arguments: dict[str, object],
    effects: list[str],
    irreversible: bool,
    tool: str,
    resource: str,
    ref: str,
    at: datetime,
    report: dict[str, str],
) -> None:
    plan, root = _plan_with_root(store)
    call = ToolInvocation(
        plan_id=plan.plan_id,
        decision_id=root.decision_id,
        tool=tool,
        arguments=arguments,
        side_effects=tuple(effects),
        irreversible=irreversible,
        created_at=at,
    )
    group = CheckpointGroup(
        plan_id=plan.plan_id, decision_id=root.decision_id, status="committed", created_at=at
    )
    checkpoint = CheckpointMetadata(
        plan_id=plan.plan_id,
        group_id=group.group_id,
        decision_id=root.decision_id,
        resource_id=resource,
        checkpoint_type=CheckpointType.DECISION_POINT,
        strategy=SandboxStrategyName.OVERLAY,
        ref=ref,
        created_at=at,
    )
    correction = CorrectionAttempt(
        plan_id=plan.plan_id,
        target_decision_id=root.decision_id,
        mode="append",
        guidance=ref,
        status="failed",
        attempt=2,
        report=report,
        created_at=at,
        finished_at=at,
    )
    with store.unit_of_work(write=True) as uow:
        if resource not in {r.resource_id for r in uow.resources.all()}:
            uow.resources.add(
                Resource(
                    resource_id=resource,
                    kind="filesystem",
                    location="/tmp/x",
                    sandbox_strategy="overlay",
                    created_at=at,
                )
            )
        uow.tool_invocations.add(call)
        uow.commit()
    add_groups(store, group)
    with store.unit_of_work(write=True) as uow:
        uow.checkpoints.add(checkpoint)
        uow.corrections.add(correction)
        uow.commit()
    with store.unit_of_work() as uow:
        assert uow.tool_invocations.for_decision(root.decision_id) == [call]
        assert uow.checkpoints.for_decision(root.decision_id) == [checkpoint]
        assert plan_groups(store, plan.plan_id) == [group]
        assert uow.checkpoints.group_of(plan.plan_id, str(group.decision_id)) == group
        assert uow.checkpoints.group_of(plan.plan_id, plan.plan_id) is None
        assert uow.corrections.for_plan(plan.plan_id) == [correction]
