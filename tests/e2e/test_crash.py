"""The plan process killed with SIGKILL in the middle of Execute: nothing is lost.

`agents doctor` finds the checkpoint group the crash left pending and repairs it; the plan
then resumes from the LangGraph checkpoint before the interrupted decision and reaches the
Apply gate with every decision recorded exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from cleveragents_tui.failpoints import ENV_VAR


def agents(
    tmp_path: Path, *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AGENTS_DATABASE_URL": str(tmp_path / "agents.db"),
        "AGENTS_SANDBOX_DIR": str(tmp_path / "sandboxes"),
        **(extra_env or {}),
    }
    env.pop(ENV_VAR, None) if not extra_env or ENV_VAR not in extra_env else None
    return subprocess.run(
        [sys.executable, "-m", "cleveragents_tui", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_sigkill_mid_execute_then_doctor_repair_then_resume(tmp_path: Path) -> None:
    crashed = agents(
        tmp_path,
        "demo",
        "--dir",
        str(tmp_path / "demo"),
        # once a checkpoint is noted on a pending group: the first Execute decision modified
        # nothing, so its group is committed with it and never pending
        extra_env={ENV_VAR: "checkpoint.after_resource=kill"},
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr

    plans = json.loads(agents(tmp_path, "plan", "list", "--format=json").stdout)["plans"]
    parent = next(p for p in plans if p["parent_plan_id"] is None)
    assert parent["phase"] == "execute" and parent["state"] == "running"

    doctor = agents(tmp_path, "doctor")
    assert doctor.returncode == 1 and doctor.stdout.startswith("pending-group:")
    repaired = agents(tmp_path, "doctor", "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "repaired: pending group" in repaired.stdout

    resumed = agents(tmp_path, "plan", "run", parent["plan_id"])
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "awaiting_approval" in resumed.stdout.splitlines()[0]
    tree = json.loads(agents(tmp_path, "plan", "tree", parent["plan_id"], "--format=json").stdout)
    keys = [d["chosen_option"] for d in tree["decisions"]]
    assert len(keys) == len(set(keys)) == 8  # every decision once, none lost, none twice
    assert agents(tmp_path, "doctor").returncode == 0
