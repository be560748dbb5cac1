"""One runner per plan: a second one, in another process or thread, is told the plan is busy
and changes nothing; a runner killed by a crash does not leave the plan held."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.ops.doctor import run_checks
from cleveragents_tui.engine.run.lifecycle import apply_plan, resume_plan
from cleveragents_tui.engine.run.run_lease import PlanBusyError
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.support.run_lease import held_by_another_thread

HOLD = """
import sys
from pathlib import Path
from cleveragents_tui.engine.run import run_lease
with run_lease.holding(Path(sys.argv[1]), sys.argv[2], "running"):
    print("held", flush=True)
    sys.stdin.read()
"""


class Demo:
    def __init__(self, store: Store, tmp_path: Path) -> None:
        self.store = store
        self.base = tmp_path / "sandboxes"
        self.options = RunOptions(sandbox_base=self.base)
        demo = build_demo(store, tmp_path / "demo")
        plan = start_plan(
            store, load_action(str(demo.action_file)), profile_override="auto", options=self.options
        )
        self.plan_id = plan.plan_id
        with store.unit_of_work() as uow:
            [announce] = [
                d for d in uow.decisions.for_plan(plan.plan_id) if d.step_key == "announce"
            ]
        self.announce = announce.decision_id

    def footprint(self) -> tuple[object, ...]:
        """What a run or a correction would change."""
        with self.store.unit_of_work() as uow:
            plan = uow.plans.get(self.plan_id)
            return (
                plan.version,
                plan.state,
                len(uow.decisions.for_plan(self.plan_id)),
                len(uow.corrections.for_plan(self.plan_id)),
                [a.approval_id for a in uow.approvals.pending(self.plan_id)],
            )


@pytest.fixture
def demo(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Demo:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return Demo(store, tmp_path)


@pytest.fixture
def holder(demo: Demo) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the plan, as a runner in a terminal would."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(demo.base), demo.plan_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    yield process
    if process.poll() is None:
        process.communicate("")


def test_a_run_while_another_process_runs_the_plan_is_refused(
    demo: Demo, holder: subprocess.Popen[str]
) -> None:
    before = demo.footprint()
    with pytest.raises(PlanBusyError, match=rf"is busy: process {holder.pid} is running it"):
        resume_plan(demo.store, demo.plan_id, demo.options)
    with pytest.raises(PlanBusyError, match="is running it"):  # the Apply gate stays open
        apply_plan(demo.store, demo.plan_id, "li", demo.options)
    impact = preview(demo.store, demo.announce, CorrectionMode.REVERT, "louder")
    with pytest.raises(PlanBusyError, match="agents plan pause"):
        execute(demo.store, impact, acknowledged=True, requested_by="li", options=demo.options)
    assert demo.footprint() == before
    holder.communicate("")  # that run ends: the plan is free
    resume_plan(demo.store, demo.plan_id, demo.options)


def test_a_runner_killed_by_a_crash_leaves_the_plan_free(
    demo: Demo, holder: subprocess.Popen[str]
) -> None:
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    impact = preview(demo.store, demo.announce, CorrectionMode.REVERT, "louder")
    result = execute(demo.store, impact, acknowledged=True, requested_by="li", options=demo.options)
    assert result.correction.status.value == "succeeded"
    report = run_checks(demo.store, demo.base)
    assert not [p for p in report.problems if p.check == "stale-lock"]


def test_another_thread_is_refused_and_the_holding_thread_may_nest(demo: Demo) -> None:
    with held_by_another_thread(demo.base, demo.plan_id, "correcting", "running"):
        before = demo.footprint()
        with pytest.raises(PlanBusyError, match="another task of this process is correcting it"):
            resume_plan(demo.store, demo.plan_id, demo.options)
        assert demo.footprint() == before
    resume_plan(demo.store, demo.plan_id, demo.options)


def test_the_cli_says_so_in_one_line(
    demo: Demo, holder: subprocess.Popen[str], db_url: str
) -> None:
    before = demo.footprint()
    result = CliRunner().invoke(cli, ["--db", db_url, "plan", "run", demo.plan_id])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and f"is busy: process {holder.pid} is running it" in line
    assert demo.footprint() == before
