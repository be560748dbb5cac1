"""Checkpoint groups against real resources: git, a directory copy, a SQLite savepoint, none."""

from __future__ import annotations

import pytest

from cleveragents_tui.domain.enums import CheckpointType
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.rollback import ResourceOutcome
from cleveragents_tui.engine.core.checkpoints import CheckpointGroupError, store_execute_decision
from cleveragents_tui.engine.core.rollback import RollbackRefusedError, rollback_to_decision
from cleveragents_tui.engine.ops.doctor import run_checks
from cleveragents_tui.failpoints import ENV_VAR
from tests.engine.conftest import API, DB, FILES, GIT, World
from tests.support.store_rows import plan_groups


def snapshot(world: World) -> dict[str, object]:
    """What a user would look at: the files of both sandboxes and the table's rows."""
    state: dict[str, object] = {}
    for resource_id in (GIT, FILES):
        workdir = world.sandboxes.get(resource_id).workdir
        assert workdir is not None
        state[resource_id] = {
            str(p.relative_to(workdir)): p.read_bytes()
            for p in sorted(workdir.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(workdir).parts
        }
    state[DB] = world.rows()
    return state


def test_a_group_has_one_checkpoint_per_modified_resource(world: World) -> None:
    world.write_file(GIT, "src/app.py", "print('hi')\n")
    world.sandboxes.note_write(API)
    decision = world.decision("edit the app")
    group = store_execute_decision(world.sandboxes, decision)
    with world.store.unit_of_work() as uow:
        rows = uow.checkpoints.for_decision(decision.decision_id)
        assert uow.decisions.get(decision.decision_id) == decision
        [stored] = [
            g for g in plan_groups(world.store, world.plan.plan_id) if g.group_id == group.group_id
        ]
    assert stored.status == "committed" and stored.decision_id == decision.decision_id
    assert {(r.resource_id, r.checkpoint_type) for r in rows} == {
        (GIT, CheckpointType.DECISION_POINT),
        (API, CheckpointType.NON_ROLLBACKABLE),
    }  # the directory and the database were not modified: no row


@pytest.mark.parametrize("failing", [GIT, FILES, DB])
def test_a_failure_in_any_resource_leaves_no_group_and_no_decision(
    world: World, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    world.write_file(GIT, "src/app.py", "v2\n")
    world.write_file(FILES, "docs/guide.md", "guide v2\n")
    world.sql("INSERT INTO greetings (text) VALUES ('hi')")
    before = snapshot(world)
    monkeypatch.setenv(ENV_VAR, f"checkpoint.after_resource@{failing}")
    decision = world.decision("doomed")
    with pytest.raises(CheckpointGroupError, match=f"was not recorded.*{failing}"):
        store_execute_decision(world.sandboxes, decision)
    with world.store.unit_of_work() as uow:
        assert uow.checkpoints.for_decision(decision.decision_id) == []
        assert all(g.decision_id is not None for g in plan_groups(world.store, world.plan.plan_id))
        assert uow.checkpoints.pending_groups() == []
        with pytest.raises(UserError, match="does not exist"):
            uow.decisions.get(decision.decision_id)
    assert snapshot(world) == before
    monkeypatch.delenv(ENV_VAR)
    assert run_checks(world.store, world.base).problems == []


def test_a_failure_at_commit_drops_every_checkpoint_made(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.write_file(GIT, "src/app.py", "v2\n")
    world.sql("INSERT INTO greetings (text) VALUES ('hi')")
    savepoints_before = world.sandboxes.get(DB).checkpoints  # type: ignore[attr-defined]
    monkeypatch.setenv(ENV_VAR, "checkpoint.before_commit")
    with pytest.raises(CheckpointGroupError):
        store_execute_decision(world.sandboxes, world.decision("doomed"))
    assert world.sandboxes.get(DB).checkpoints == savepoints_before  # type: ignore[attr-defined]


def test_rollback_restores_every_resource_to_the_decision(world: World) -> None:
    world.write_file(GIT, "src/app.py", "v2\n")
    world.sql("INSERT INTO greetings (text) VALUES ('second')")
    first = world.decision("first step")
    store_execute_decision(world.sandboxes, first)
    at_first = snapshot(world)

    world.write_file(GIT, "src/new_module.py", "untracked and new\n")
    (world.sandboxes.get(GIT).workdir / "README.md").unlink()  # type: ignore[operator]
    world.write_file(FILES, "docs/guide.md", "guide v2\n")  # first written after `first`
    world.sql("UPDATE greetings SET text = 'changed' WHERE id = 1")
    world.sql("INSERT INTO greetings (text) VALUES ('third')")
    second = world.decision("second step")
    store_execute_decision(world.sandboxes, second)
    assert snapshot(world) != at_first

    report = rollback_to_decision(world.sandboxes, first.decision_id)
    assert report.succeeded
    assert {r.resource_id: r.outcome for r in report.resources} == {
        GIT: ResourceOutcome.ROLLED_BACK,
        FILES: ResourceOutcome.ROLLED_BACK,  # back to its baseline: untouched at `first`
        DB: ResourceOutcome.ROLLED_BACK,
    }
    assert snapshot(world) == at_first


def test_none_resources_are_reported_not_rollbackable(world: World) -> None:
    world.sandboxes.note_write(API)
    decision = world.decision("call the api")
    store_execute_decision(world.sandboxes, decision)
    report = rollback_to_decision(world.sandboxes, decision.decision_id)
    assert report.outcome_of(API) is ResourceOutcome.NOT_ROLLBACKABLE
    assert report.succeeded


def test_a_failed_rollback_leaves_every_resource_as_it_was(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.write_file(GIT, "src/app.py", "v2\n")
    world.write_file(FILES, "docs/guide.md", "guide v2\n")
    world.sql("INSERT INTO greetings (text) VALUES ('second')")
    first = world.decision("first step")
    store_execute_decision(world.sandboxes, first)
    world.write_file(GIT, "src/app.py", "v3\n")
    world.write_file(FILES, "docs/new.md", "new\n")
    world.sql("DELETE FROM greetings")
    before = snapshot(world)

    # Order: files, repo, then the database last (a savepoint rollback cannot be undone).
    monkeypatch.setenv(ENV_VAR, f"rollback.resource@{DB}")
    report = rollback_to_decision(world.sandboxes, first.decision_id)
    assert not report.succeeded
    assert report.outcome_of(DB) is ResourceOutcome.FAILED
    assert report.outcome_of(GIT) is ResourceOutcome.RESTORED
    assert report.outcome_of(FILES) is ResourceOutcome.RESTORED
    assert snapshot(world) == before


def test_a_failure_before_the_database_leaves_the_database_untouched(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.write_file(GIT, "src/app.py", "v2\n")
    world.sql("INSERT INTO greetings (text) VALUES ('second')")
    first = world.decision("first step")
    store_execute_decision(world.sandboxes, first)
    world.write_file(GIT, "src/app.py", "v3\n")
    world.sql("DELETE FROM greetings")
    before = snapshot(world)
    monkeypatch.setenv(ENV_VAR, f"rollback.resource@{GIT}")
    report = rollback_to_decision(world.sandboxes, first.decision_id)
    assert report.outcome_of(GIT) is ResourceOutcome.FAILED
    assert report.outcome_of(FILES) is ResourceOutcome.RESTORED
    assert report.outcome_of(DB) is ResourceOutcome.UNTOUCHED
    assert snapshot(world) == before


def test_budget_prunes_pre_write_first_and_refuses_rollback_to_a_pruned_decision(
    world: World,
) -> None:
    from cleveragents_tui.engine.core.checkpoints import pre_write_checkpoint

    budget = world.sandboxes.get(FILES).resource.checkpoint_max_per_plan
    decisions = []
    for i in range(budget + 5):
        world.write_file(FILES, "docs/guide.md", f"guide v{i}\n")
        pre_write_checkpoint(world.sandboxes, FILES)
        decision = world.decision(f"step {i}")
        store_execute_decision(world.sandboxes, decision)
        decisions.append(decision)
    with world.store.unit_of_work() as uow:
        rows = uow.checkpoints.for_plan(world.plan.plan_id, FILES)
    live = [r for r in rows if r.pruned_at is None]
    assert len(live) == budget
    assert live[0] == rows[0]  # the baseline
    assert live[-2].checkpoint_type is CheckpointType.PRE_WRITE  # the newest: a retry's
    assert all(r.checkpoint_type is CheckpointType.DECISION_POINT for r in live[1:-2])
    pruned_decisions = {r.decision_id for r in rows if r.pruned_at is not None and r.decision_id}
    assert pruned_decisions, "more decisions than the budget: some decision checkpoints went"
    oldest = decisions[0]
    assert oldest.decision_id in pruned_decisions
    with pytest.raises(RollbackRefusedError, match="was pruned by the checkpoint budget"):
        rollback_to_decision(world.sandboxes, oldest.decision_id)
    report = rollback_to_decision(world.sandboxes, decisions[-3].decision_id)
    assert report.succeeded
    workdir = world.sandboxes.get(FILES).workdir
    assert workdir is not None
    assert (workdir / "docs/guide.md").read_text() == f"guide v{budget + 2}\n"
    assert run_checks(world.store, world.base).problems == []


def test_rollback_of_a_strategize_decision_is_refused(world: World) -> None:
    with pytest.raises(RollbackRefusedError, match="made during strategize"):
        rollback_to_decision(world.sandboxes, world.root.decision_id)
