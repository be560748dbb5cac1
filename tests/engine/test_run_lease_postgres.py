"""Two hosts, one PostgreSQL database: each runs its own processes with its own sandbox
folder, so the run lease's lock file cannot see the other. On PostgreSQL the lease is also
an advisory lock on the server: while one correction holds the plan, a correction from the
other host is refused with the "busy" line (exit 2, nothing changed) — then the first wins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.read.browse import plan_tree
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store

pytestmark = pytest.mark.postgres

RECORD = "A row in the releases table"
GUIDANCE = "record rc1"


def test_a_correction_from_another_host_is_refused_while_one_runs(
    postgres_url: str, tmp_path: Path
) -> None:
    host_a = tmp_path / "host-a"
    host_b = tmp_path / "host-b"
    store = Store.open(postgres_url)
    try:
        options = RunOptions(sandbox_base=host_a / "sandboxes")
        env = build_demo(store, host_a / "demo")
        plan = start_plan(
            store, load_action(str(env.action_file)), profile_override="auto", options=options
        )
        target = next(
            line.row.decision_id
            for line in plan_tree(store, plan.plan_id).lines
            if line.row.chosen_option == RECORD
        )
        impact = preview(
            store,
            target,
            CorrectionMode.REVERT,
            GUIDANCE,
            choose=1,
            sandbox_base=options.sandbox_base,
        )
        with run_lease.holding(options.sandbox_base, plan.plan_id, "correcting", store):
            # host B: its own HOME and sandbox folder, the same database
            host_b.mkdir()
            other = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "cleveragents_tui",
                    "--db",
                    postgres_url,
                    "plan",
                    "correct",
                    target,
                    "--mode=revert",
                    "--guidance",
                    GUIDANCE,
                    "--choose",
                    "1",
                    "--yes",
                ],
                capture_output=True,
                text=True,
                timeout=300,
                env={
                    **os.environ,
                    "HOME": str(host_b),
                    "AGENTS_SANDBOX_DIR": str(host_b / "sandboxes"),
                },
            )
            assert other.returncode == 2, other.stdout + other.stderr
            assert other.stderr.count("\n") == 1, other.stderr
            assert f"plan {plan.plan_id} is busy" in other.stderr, other.stderr
            assert "Traceback" not in other.stderr
            with store.unit_of_work() as uow:
                assert uow.plans.get(plan.plan_id).attempt == plan.attempt  # nothing changed
            # and `agents doctor` on host B sees the plan held, not left running
            assert run_lease.is_held(host_b / "sandboxes", plan.plan_id, store)
        assert not run_lease.is_held(host_b / "sandboxes", plan.plan_id, store)
        # host A's correction goes on and wins
        result = execute(store, impact, acknowledged=True, requested_by="alice", options=options)
        assert result.correction.status is CorrectionStatus.SUCCEEDED
    finally:
        store.close()
