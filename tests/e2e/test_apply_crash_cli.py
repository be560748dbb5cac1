"""An Apply SIGKILLed halfway is reported by `agents doctor` and finished by `doctor --repair`
or `plan run`; an Apply that ends refused exits 2 with its reason from `plan run` too.

Each command runs in its own process, as a person at a shell runs it; the kill is a real
SIGKILL at a failpoint (``AGENTS_FAILPOINTS``). Before the apply journal, a kill right after
the docs folder was written left every later Apply ``constrained`` ("guide.md changed since
the sandbox was made": the plan's own content), `doctor` reported nothing, and `plan run`
exited 0 on the constrained plan with no reason.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.failpoints import ENV_VAR


class Cli:
    """``agents --db URL ...`` in a new process each call, with its own home and sandboxes."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {
            **{k: v for k, v in os.environ.items() if k != ENV_VAR},
            "HOME": str(home),
            "AGENTS_SANDBOX_DIR": str(home / "sandboxes"),
        }

    def __call__(
        self, *args: str, failpoint: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        env = {**self.env, ENV_VAR: failpoint} if failpoint else self.env
        return subprocess.run(
            [sys.executable, "-m", "cleveragents_tui", "--db", str(self.home / "agents.db"), *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=self.home,
            check=False,
            timeout=300,
        )

    def demo(self) -> str:
        made = self("demo", "--no-tui", "--dir", str(self.home / "demo"), "--format=json")
        assert made.returncode == 0, made.stderr
        plan_id: str = json.loads(made.stdout)["plan_id"]
        return plan_id

    def held(self, plan_id: str) -> dict[str, Any]:
        """What the real resources hold: the apply branch's tree, the rows, the docs files;
        and the plans' states."""
        demo = self.home / "demo"
        tree = subprocess.run(
            ["git", "-C", str(demo / "hello-cli"), "rev-parse", "-q", "--verify",
             f"refs/heads/cleveragents/apply/{plan_id}^{{tree}}"],
            capture_output=True, text=True, check=False,
        ).stdout.strip()  # fmt: skip
        with sqlite3.connect(demo / "app.db") as db:
            rows = [list(r) for r in db.execute("SELECT * FROM releases ORDER BY id")]
        db.close()
        docs = {p.name: p.read_bytes() for p in sorted((demo / "docs").iterdir())}
        plans = json.loads(self("plan", "list", "--format=json").stdout)["plans"]
        return {
            "tree": tree,
            "rows": rows,
            "docs": docs,
            "states": sorted(f"{p['phase']}/{p['state']}" for p in plans),
        }


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What an Apply nobody interrupted leaves on the real resources."""
    cli = Cli(tmp_path_factory.mktemp("reference"))
    plan_id = cli.demo()
    applied = cli("plan", "apply", plan_id)
    assert applied.returncode == 0, applied.stderr
    held = cli.held(plan_id)
    assert held["tree"] and held["rows"] and held["docs"], held
    assert set(held["states"]) == {"apply/applied"}, held
    return held


def test_a_kill_after_the_docs_landed_is_reported_and_finished_by_doctor_repair(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    cli = Cli(tmp_path)
    plan_id = cli.demo()
    # The docs sandbox's first file write in Apply is its meta, saved once the files landed.
    killed = cli("plan", "apply", plan_id, failpoint="fs.write@file#1=kill")
    assert killed.returncode == -signal.SIGKILL

    found = cli("doctor")
    assert found.returncode == 1
    assert f"half-applied: {plan_id}" in found.stdout, found.stdout

    repaired = cli("doctor", "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert f"repaired: plan {plan_id}, half-applied by a crash: Apply finished, applied" in (
        repaired.stdout
    )
    assert cli.held(plan_id) == reference
    assert cli("doctor").returncode == 0


@pytest.mark.parametrize(
    "failpoint",
    # After the database landed (its sandbox then has no checkpoints), before it was journaled;
    # and after it was journaled landed, before the team chat.
    ["apply.landed#3=kill", "apply.resource#4=kill"],
)
def test_doctor_reports_a_half_applied_plan_as_one_problem_and_repair_clears_it(
    tmp_path: Path, reference: dict[str, Any], failpoint: str
) -> None:
    """Not also ``checkpoint-missing`` for the landed database's checkpoints, nor
    ``left-running`` for the same plan: the one problem is the unfinished Apply."""
    cli = Cli(tmp_path)
    plan_id = cli.demo()
    assert cli("plan", "apply", plan_id, failpoint=failpoint).returncode == -signal.SIGKILL

    found = cli("doctor")
    assert found.returncode == 1
    assert found.stdout.splitlines() == [
        line for line in found.stdout.splitlines() if line.startswith(f"half-applied: {plan_id}:")
    ], found.stdout
    assert len(found.stdout.splitlines()) == 1, found.stdout
    assert "/docs" in found.stdout.partition("landed ")[2].partition("; not yet")[0], found.stdout

    repaired = cli("doctor", "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert repaired.stdout.splitlines()[0] == (
        f"repaired: plan {plan_id}, half-applied by a crash: Apply finished, applied"
    )
    assert repaired.stdout.splitlines()[-1].startswith("ok: "), repaired.stdout
    assert cli.held(plan_id) == reference
    assert cli("doctor").returncode == 0


@pytest.mark.parametrize(
    "failpoint",
    ["sqlite.land@committed=kill", "apply.landed#2=kill", "apply.resource#3=kill"],
)
def test_plan_run_finishes_an_apply_killed_halfway(
    tmp_path: Path, reference: dict[str, Any], failpoint: str
) -> None:
    cli = Cli(tmp_path)
    plan_id = cli.demo()
    assert cli("plan", "apply", plan_id, failpoint=failpoint).returncode == -signal.SIGKILL
    # an Apply has no step to pause after: refused, in one line naming the way on
    paused = cli("plan", "pause", plan_id)
    assert paused.returncode == 2, paused.stdout
    assert paused.stderr == (
        f"error: plan {plan_id} is being applied: an Apply cannot be paused: wait for it to "
        f"land; one that was stopped is finished by agents plan run {plan_id}\n"
    )

    again = cli("plan", "run", plan_id)
    assert again.returncode == 0, again.stderr
    assert "applied" in again.stdout
    assert cli.held(plan_id) == reference
    assert cli("doctor").returncode == 0


def test_plan_run_exits_3_with_the_reason_when_the_apply_is_refused(tmp_path: Path) -> None:
    cli = Cli(tmp_path)
    plan_id = cli.demo()
    (tmp_path / "demo" / "docs" / "guide.md").write_text("someone else's guide\n")

    refused = cli("plan", "apply", plan_id)
    assert refused.returncode == 3  # constrained (cli/outcome.py)
    again = cli("plan", "run", plan_id)
    assert again.returncode == 3, again.stdout
    line = again.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert f"plan {plan_id} was not applied (constrained)" in line
    assert "guide.md" in line
    assert (tmp_path / "demo" / "docs" / "guide.md").read_text() == "someone else's guide\n"
