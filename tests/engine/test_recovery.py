"""A crash in the middle of a checkpoint group: recovery cleans up, doctor reports and agrees."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from click.testing import CliRunner

from cleveragents_tui.cli import cli
from cleveragents_tui.engine.ops.doctor import STALE_LOCK_SECONDS, run_checks
from cleveragents_tui.engine.ops.recovery import recover_pending_groups
from cleveragents_tui.failpoints import ENV_VAR
from tests.engine.conftest import FILES, World
from tests.support.run_lease import held_by_another_thread

CRASHING_RECORD = """
import sys
from pathlib import Path
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.engine.core.checkpoints import store_execute_decision
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.store.store import Store

db, plan_id, root_id, base = sys.argv[1:5]
sandboxes = PlanSandboxes(Store.open(db), plan_id, Path(base))
workdir = sandboxes.get("local/files").workdir
(workdir / "docs" / "guide.md").write_text("written just before the crash\\n")
sandboxes.note_write("local/files")
decision = Decision(plan_id=plan_id, parent_decision_id=root_id, sequence_number=77,
                    decision_type="implementation_choice", question="q", chosen_option="crash")
store_execute_decision(sandboxes, decision)
print("NOT KILLED")
"""


def _crash_while_recording(world: World) -> None:
    db = str(world.store.engine.url.database)
    env = {**os.environ, ENV_VAR: "checkpoint.before_commit=kill"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            CRASHING_RECORD,
            db,
            world.plan.plan_id,
            world.root.decision_id,
            str(world.base),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == -signal.SIGKILL, result.stdout + result.stderr


def test_a_crash_before_commit_leaves_a_pending_group_that_recovery_removes(world: World) -> None:
    _crash_while_recording(world)
    with world.store.unit_of_work() as uow:
        [(group, refs)] = uow.checkpoints.pending_groups()
    assert [resource for resource, _ in refs] == [FILES]
    problems = run_checks(world.store, world.base).problems
    assert [p.check for p in problems] == ["pending-group"]

    [recovered] = recover_pending_groups(world.store, world.base)
    assert recovered.group_id == group.group_id
    assert len(recovered.dropped) == 1 and recovered.left == ()
    with world.store.unit_of_work() as uow:
        assert uow.checkpoints.pending_groups() == []
        assert (
            uow.decisions.next_sequence_number(world.plan.plan_id) == 1
        )  # the decision never landed
    assert run_checks(world.store, world.base).problems == []


def test_recovery_leaves_the_group_of_a_plan_a_live_runner_holds(world: World) -> None:
    """A group a running process is recording is pending too: repair waits for that run."""
    _crash_while_recording(world)
    with held_by_another_thread(world.base, world.plan.plan_id, "running"):
        assert recover_pending_groups(world.store, world.base) == []
        with world.store.unit_of_work() as uow:
            assert len(uow.checkpoints.pending_groups()) == 1
    assert len(recover_pending_groups(world.store, world.base)) == 1


def test_doctor_reports_a_missing_checkpoint_and_a_stale_lock(world: World) -> None:
    world.write_file(FILES, "docs/guide.md", "v2\n")
    decision = world.decision("edit the guide")
    from cleveragents_tui.engine.core.checkpoints import store_execute_decision

    store_execute_decision(world.sandboxes, decision)
    with world.store.unit_of_work() as uow:
        [checkpoint] = uow.checkpoints.for_decision(decision.decision_id)
    world.sandboxes.get(FILES).drop_checkpoint(checkpoint.ref)  # as if its objects were lost
    lock = world.base / "index.lock"
    lock.write_text("")
    flock = world.base / "some_plan" / "local__db" / "transaction_rollback.lock"
    flock.parent.mkdir(parents=True)
    flock.write_text("")  # a database sandbox's flock file: present for as long as it lives
    old = time.time() - STALE_LOCK_SECONDS - 60
    os.utime(lock, (old, old))
    os.utime(flock, (old, old))

    result = CliRunner().invoke(
        cli,
        ["--db", str(world.store.engine.url.database), "doctor"],
        env={"AGENTS_SANDBOX_DIR": str(world.base)},
    )
    assert result.exit_code == 1
    checks = sorted(line.split(":")[0] for line in result.output.splitlines())
    assert checks == ["checkpoint-missing", "stale-lock"]  # the flock file is not reported
    assert f"{FILES}@{checkpoint.checkpoint_id}" in result.output
