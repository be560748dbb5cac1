"""The invariant checker (engine/ops/invariants.py): clean state passes, and each invariant
catches the damage it is about — made here on purpose, with real SQL, files and LangGraph
checkpoints — and ``repair_corrections`` finishes what a crash interrupted."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from cleveragents_tui.actors.checkpointer import open_checkpointer
from cleveragents_tui.actors.graphs import Actor
from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import ActorStateRef, ContextSnapshot, Decision
from cleveragents_tui.domain.enums import CorrectionMode, DecisionType, Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.core.checkpoints import store_execute_decision
from cleveragents_tui.engine.ops.doctor import repair_corrections, repair_left_running
from cleveragents_tui.engine.ops.invariants import InvariantReport, check_invariants
from cleveragents_tui.store.store import Store
from tests.engine.conftest import FILES, World
from tests.reliability import scenario
from tests.reliability.harness import Worker
from tests.support.run_lease import held_by_another_thread
from tests.support.store_rows import add_groups


def check(world: World) -> InvariantReport:
    return check_invariants(world.store, base_dir=world.base)


def broken(world: World) -> set[str]:
    return {v.invariant for v in check(world).violations}


def add(world: World, *decisions: Decision) -> None:
    with world.store.unit_of_work(write=True) as uow:
        for decision in decisions:
            uow.decisions.add(decision)
        uow.commit()


def run_here(world: World, state: PlanState = PlanState.AWAITING_APPROVAL) -> None:
    """Give the plan a stored action: a plan run by this engine, held to every rule, and
    stopped where a run stops (a gate) unless ``state`` says otherwise."""
    with world.store.unit_of_work(write=True) as uow:
        uow.plan_actions.save(world.plan.plan_id, {"name": "local/groups"})
        plan = uow.plans.get(world.plan.plan_id)
        uow.plans.save(plan.model_copy(update={"state": state}))
        uow.commit()


def test_a_plan_left_running_without_a_runner_is_reported_then_repaired(world: World) -> None:
    assert broken(world) == set()  # never run here (no stored action): its state is recorded
    run_here(world, PlanState.RUNNING)
    [violation] = check(world).violations
    assert (violation.invariant, violation.subject) == ("left-running", world.plan.plan_id)
    with held_by_another_thread(world.base, world.plan.plan_id, "running"):
        assert broken(world) == set()  # a live runner holds it
        assert repair_left_running(world.store, world.base) == []
    child = Plan(
        action="local/child",
        phase="execute",
        state="running",
        parent_plan_id=world.plan.plan_id,
        spawning_decision_id=world.root.decision_id,
    )
    with world.store.unit_of_work(write=True) as uow:
        uow.plans.add(child)
        uow.flush()
        uow.plan_actions.save(child.plan_id, {"name": "local/child"})
        uow.commit()
    [violation] = check(world).violations  # the child: its parent's run runs it on
    assert violation.subject == world.plan.plan_id
    assert repair_left_running(world.store, world.base) == [world.plan.plan_id]
    with world.store.unit_of_work() as uow:
        assert uow.plans.get(world.plan.plan_id).state is PlanState.PAUSED
        # paused with it (its run was the parent's): resuming the parent resumes both
        assert uow.plans.get(child.plan_id).state is PlanState.PAUSED
    assert broken(world) == set()
    sql(world, "UPDATE plans SET state = 'completed' WHERE plan_id = :p", p=world.plan.plan_id)
    sql(world, "UPDATE plans SET state = 'running' WHERE plan_id = :p", p=child.plan_id)
    [violation] = check(world).violations  # a parent past Execute no longer runs it
    assert (violation.invariant, violation.subject) == ("left-running", child.plan_id)


def sql(world: World, statement: str, **values: object) -> None:
    with world.store.unit_of_work(write=True) as uow:
        uow._session.execute(text(statement), values)
        uow.commit()


def test_a_plan_recorded_by_the_engine_passes_and_every_check_looks(world: World) -> None:
    run_here(world)
    world.write_file(FILES, "docs/guide.md", "v2\n")
    store_execute_decision(world.sandboxes, world.decision("edit the guide"))
    report = check(world)
    assert report.ok, report.violations
    for invariant in ("pending-group", "execute-group", "append-only", "current-tree"):
        assert report.checked[invariant] > 0, invariant
    assert report.checked["archive-object"] > 0 and report.checked["checkpoint-missing"] > 0


def test_a_pending_group_and_a_committed_group_without_decision(world: World) -> None:
    add_groups(
        world.store,
        CheckpointGroup(plan_id=world.plan.plan_id),
        CheckpointGroup(plan_id=world.plan.plan_id, status="committed"),
    )
    assert broken(world) == {"pending-group", "group-without-decision"}


def test_an_execute_decision_without_its_group(world: World) -> None:
    lonely = world.decision("no checkpoints")
    guidance = Decision(
        plan_id=world.plan.plan_id,
        parent_decision_id=world.root.decision_id,
        sequence_number=world.sequence,
        decision_type="user_intervention",
        phase=Phase.EXECUTE,
        question="correction",
        chosen_option="the guidance",
        is_correction=True,
        corrects_decision_id=lonely.decision_id,
    )
    add(world, lonely, guidance)
    assert broken(world) == set()  # a plan without a stored action was not run here
    run_here(world)
    [violation] = check(world).violations
    assert (violation.invariant, violation.subject) == ("execute-group", lonely.decision_id)


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ("DROP TRIGGER decisions_no_delete", "the append-only triggers decisions_no_delete"),
        ("DROP TRIGGER decisions_supersede_only", "decisions_supersede_only are missing"),
    ],
)
def test_missing_append_only_triggers(world: World, damage: str, expected: str) -> None:
    sql(world, damage)
    [violation] = check(world).violations
    assert violation.invariant == "append-only" and expected in violation.message


def test_a_gap_in_the_sequence_and_a_parent_recorded_later(world: World) -> None:
    early = world.decision("recorded first")
    world.sequence = 5  # 2..4 missing, as if deleted
    late = world.decision("recorded last")
    add(world, early, late)
    sql(world, "DROP TRIGGER decisions_supersede_only")
    sql(
        world,
        f"UPDATE decisions SET parent_decision_id = '{late.decision_id}' "
        f"WHERE decision_id = '{early.decision_id}'",
    )
    messages = [v.message for v in check(world).violations if v.invariant == "append-only"]
    assert any("2, 3, 4 are missing" in m for m in messages), messages
    assert any("was not recorded before it" in m for m in messages), messages


def test_a_row_edited_into_an_invalid_decision_is_reported_not_raised(world: World) -> None:
    sql(world, "DROP TRIGGER decisions_supersede_only")
    sql(
        world,
        f"UPDATE decisions SET confidence_score = NULL, decision_type = 'guess' "
        f"WHERE decision_id = '{world.root.decision_id}'",
    )
    messages = [v.message for v in check(world).violations if v.invariant == "append-only"]
    assert any("is not a valid decision" in m for m in messages), messages


def test_a_context_that_does_not_match_its_hash(world: World) -> None:
    body = '{"state":{}}'
    digest = hashlib.sha256(body.encode()).hexdigest()
    decision = world.decision("with context").model_copy(
        update={
            "phase": Phase.STRATEGIZE,
            "decision_type": DecisionType.STRATEGY_CHOICE,
            "context_snapshot": ContextSnapshot(
                hot_context_hash=digest, hot_context_ref=f"context:{digest}"
            ),
        }
    )
    with world.store.unit_of_work(write=True) as uow:
        uow.decisions.add(decision)
        uow.contexts.put(digest, body)
        uow.commit()
    assert broken(world) == set()
    sql(world, "UPDATE context_blobs SET body = :body", body='{"state":{"edited":1}}')
    assert broken(world) == {"context-hash"}


def test_two_roots_a_superseded_parent_and_a_supersession_by_no_correction(
    world: World,
) -> None:
    second_root = Decision(
        plan_id=world.plan.plan_id,
        sequence_number=world.sequence,
        decision_type="prompt_definition",
        phase=Phase.STRATEGIZE,
        question="again?",
        chosen_option="a second root",
    )
    world.sequence += 1
    child = world.decision("under the root", kind="strategy_choice").model_copy(
        update={"phase": Phase.STRATEGIZE}
    )
    add(world, second_root, child)
    with world.store.unit_of_work(write=True) as uow:
        uow.decisions.supersede([world.root.decision_id], by=second_root.decision_id)
        uow.commit()
    found = {(v.invariant, v.subject) for v in check(world).violations}
    assert found == {
        ("current-tree", child.decision_id),  # its parent is superseded
        ("superseded-by", world.root.decision_id),  # by a decision that is no correction
    }


def test_a_decision_recorded_after_apply(world: World) -> None:
    with world.store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(world.plan.plan_id)
        uow.plans.save(plan.model_copy(update={"phase": Phase.APPLY, "state": PlanState.APPLIED}))
        uow.events.append(
            "plan_state", {"phase": "apply", "state": "applied"}, plan_id=plan.plan_id
        )
        uow.commit()
    assert broken(world) == set()
    late = world.decision("after apply").model_copy(
        update={
            "created_at": utc_now() + timedelta(seconds=1),
            "phase": Phase.STRATEGIZE,
            "decision_type": DecisionType.STRATEGY_CHOICE,
        }
    )
    add(world, late)
    [violation] = check(world).violations
    assert violation.invariant == "applied-unchanged" and late.decision_id in violation.message


def test_a_correction_left_running_is_reported_then_repaired(world: World) -> None:
    running = CorrectionAttempt(
        plan_id=world.plan.plan_id,
        target_decision_id=world.root.decision_id,
        mode=CorrectionMode.REVERT,
        attempt=2,
    )
    with world.store.unit_of_work(write=True) as uow:
        uow.corrections.add(running)
        uow.commit()
    assert broken(world) == {"correction-finished"}
    [repaired] = repair_corrections(world.store)
    assert repaired.correction_id == running.correction_id
    with world.store.unit_of_work() as uow:
        assert uow.plans.get(world.plan.plan_id).state is PlanState.ERRORED
        assert "interrupted" in uow.corrections.get(running.correction_id).report["error"]
    assert broken(world) == set()
    sql(world, "UPDATE plans SET state = 'running'")  # as if the failure had not errored it
    assert broken(world) == {"correction-finished"}


def test_repairing_an_interrupted_append_to_an_applied_plan_leaves_it_applied(
    world: World,
) -> None:
    with world.store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(world.plan.plan_id)
        uow.plans.save(plan.model_copy(update={"phase": Phase.APPLY, "state": PlanState.APPLIED}))
        uow.events.append(
            "plan_state", {"phase": "apply", "state": "applied"}, plan_id=plan.plan_id
        )
        uow.corrections.add(
            CorrectionAttempt(
                plan_id=plan.plan_id,
                target_decision_id=world.root.decision_id,
                mode=CorrectionMode.APPEND,
                attempt=2,
            )
        )
        uow.commit()
    assert broken(world) == {"correction-finished"}
    assert len(repair_corrections(world.store)) == 1
    with world.store.unit_of_work() as uow:
        assert uow.plans.get(world.plan.plan_id).state is PlanState.APPLIED
    assert broken(world) == set()


def test_an_archive_object_that_does_not_match_its_hash(world: World) -> None:
    big = bytes(range(256)) * 20_000  # 5 MB: stored as a loose object, not in a pack
    world.write_file(FILES, "docs/big.bin", "")
    workdir = world.sandboxes.get(FILES).workdir
    assert workdir is not None
    (workdir / "docs" / "big.bin").write_bytes(big)
    store_execute_decision(world.sandboxes, world.decision("a big file"))
    assert broken(world) == set()
    objects = world.base / world.plan.plan_id / "local__files" / "objects"
    name = hashlib.sha256(big).hexdigest()
    loose = objects / name[:2] / name[2:]
    data = bytearray(loose.read_bytes())
    data[len(data) // 2] ^= 0xFF
    loose.write_bytes(bytes(data))
    found = {(v.invariant, v.subject) for v in check(world).violations}
    assert ("archive-object", f"{FILES}:{name}") in found


def _with_actor_ref(world: World, ref: ActorStateRef) -> Decision:
    decision = world.decision("from the actor", kind="strategy_choice").model_copy(
        update={"phase": Phase.STRATEGIZE, "context_snapshot": ContextSnapshot(actor_state_ref=ref)}
    )
    add(world, decision)
    return decision


def test_an_actor_state_that_does_not_load(world: World) -> None:
    noop: Callable[..., dict[str, object]] = lambda state, ref: {}  # noqa: E731
    with open_checkpointer(world.store.engine.url) as saver:
        actor = Actor(saver, world.plan.plan_id, Phase.STRATEGIZE, noop)
        actor.seed({})
        real = actor.first_checkpoint()
    assert real is not None
    _with_actor_ref(world, real)
    assert broken(world) == set()
    lost = _with_actor_ref(
        world, real.model_copy(update={"checkpoint_id": "1ef00000-dead-beef-0000-000000000000"})
    )
    [violation] = check(world).violations
    assert (violation.invariant, violation.subject) == ("actor-state", lost.decision_id)


def test_the_doctor_json_names_what_it_checked(world: World, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from cleveragents_tui.cli import cli

    result = CliRunner().invoke(
        cli,
        ["--db", str(world.store.engine.url.database), "doctor", "--format=json"],
        env={"AGENTS_SANDBOX_DIR": str(world.base)},
    )
    assert result.exit_code == 0, result.output
    assert '"checked"' in result.output and '"repaired_corrections": []' in result.output


def test_an_append_correction_leaves_an_applied_child_plan_applied(team: list[Worker]) -> None:
    """Found by the checker (applied-unchanged): appending a correction above a child plan
    that its parent's Apply had applied used to mark the child cancelled."""
    team[0].restore("gate")
    result = team[0].in_child(scenario.append_after_apply)
    [child] = result["children"]
    assert result["states"][child] == "applied"
    assert result["violations"] == []


def test_sqlite_and_postgresql_both_report_a_missing_append_only_trigger(
    store: Store, tmp_path: Path
) -> None:
    plan = Plan(action="local/triggers", phase="strategize", state="running")
    root = Decision(
        plan_id=plan.plan_id,
        sequence_number=0,
        decision_type="prompt_definition",
        phase=Phase.STRATEGIZE,
        question="goal?",
        chosen_option="keep history",
    )
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.flush()
        uow.decisions.add(root)
        uow.commit()
    report = check_invariants(store, base_dir=tmp_path)
    assert report.ok and report.checked["append-only"] == 2  # the triggers, one decision
    dialect = store.engine.dialect.name
    trigger = "decisions_no_delete" if dialect == "sqlite" else "decisions_append_only"
    with store.unit_of_work(write=True) as uow:
        uow._session.execute(
            text(f"DROP TRIGGER {trigger}" + ("" if dialect == "sqlite" else " ON decisions"))
        )
        uow.commit()
    [violation] = check_invariants(store, base_dir=tmp_path).violations
    assert violation.invariant == "append-only" and trigger in violation.message
