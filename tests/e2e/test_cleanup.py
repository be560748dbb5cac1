"""`agents plan discard` and `agents gc`, through the CLI on the demo's real repository,
database and folders: what they list is what goes, the user's checkout is never touched, the
tree stays browsable, and what a correction still needs is kept."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.enums import CheckpointType, CorrectionMode
from cleveragents_tui.engine.core.restore_point import restore_points
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment, build_demo
from cleveragents_tui.engine.ops.doctor import run_checks
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.support.run_lease import held_by_another_thread


class Demo:
    """The demo plan run to its Apply gate, with its own sandbox folder."""

    def __init__(self, store: Store, db_url: str, tmp_path: Path) -> None:
        self.store = store
        self.db_url = db_url
        self.base = tmp_path / "sandboxes"
        self.options = RunOptions(sandbox_base=self.base)
        self.env: DemoEnvironment = build_demo(store, tmp_path / "demo")
        plan = start_plan(
            store,
            load_action(str(self.env.action_file)),
            profile_override="auto",
            options=self.options,
        )
        self.plan_id = plan.plan_id
        self.repo = self.env.repository

    def agents(self, *args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(cli, ["--db", self.db_url, *args], input=input)

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.repo, check=True, capture_output=True, text=True
        ).stdout

    def ours(self) -> list[str]:
        """Every ref and worktree the plans made in the user's repository."""
        refs = self.git("for-each-ref", "--format=%(refname)").split()
        worktrees = self.git("worktree", "list", "--porcelain").count("worktree ")
        return [r for r in refs if "cleveragents" in r] + ["worktree"] * (worktrees - 1)

    def checkout(self) -> tuple[str, str, str]:
        """The user's HEAD, index and working tree."""
        return (
            self.git("rev-parse", "HEAD"),
            self.git("ls-files", "--stage"),
            self.git("status", "--porcelain", "--ignored"),
        )

    def decision(self, key: str) -> str:
        with self.store.unit_of_work() as uow:
            [found] = [
                d.decision_id
                for d in uow.decisions.for_plan(self.plan_id, include_superseded=False)
                if d.step_key == key
            ]
        return found


@pytest.fixture
def demo(
    sqlite_store: Store, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Demo:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return Demo(sqlite_store, sqlite_url, tmp_path)


def test_discard_after_apply_removes_what_it_lists_and_nothing_of_the_users(demo: Demo) -> None:
    applied = demo.agents("plan", "apply", demo.plan_id)
    assert applied.exit_code == 0, applied.output
    checkout = demo.checkout()
    assert any("apply" in r for r in demo.ours()) and demo.ours()
    assert sorted(p.name for p in demo.base.iterdir()) != []

    listed = demo.agents("--format=json", "plan", "discard", demo.plan_id, "--dry-run")
    assert listed.exit_code == 0, listed.output
    inventory = json.loads(listed.stdout)
    assert inventory["discarded"] is False and inventory["bytes"] > 0
    assert [b["merged"] for b in inventory["branches"]] == [False]
    assert len(inventory["plans"]) == 2  # the docs child plan goes with its parent

    refused = demo.agents("plan", "discard", demo.plan_id, input="n\n")
    assert refused.exit_code == 1 and "NOT merged" in refused.output
    assert all(Path(s["path"]).exists() for s in inventory["sandboxes"])

    done = demo.agents("plan", "discard", demo.plan_id, "--yes")
    assert done.exit_code == 0, done.output
    assert f"discarded plan {demo.plan_id}" in done.output
    assert not any(Path(s["path"]).exists() for s in inventory["sandboxes"])
    assert demo.ours() == []
    assert demo.checkout() == checkout
    assert not [p for p in demo.base.iterdir() if p.name in inventory["plans"]]
    with demo.store.unit_of_work() as uow:
        assert all(
            c.pruned_at is not None
            for plan_id in inventory["plans"]
            for c in uow.checkpoints.for_plan(plan_id)
        )
    tree = demo.agents("--format=json", "plan", "tree", demo.plan_id)
    assert tree.exit_code == 0 and len(json.loads(tree.stdout)["decisions"]) == 8
    assert run_checks(demo.store, demo.base).problems == []


def test_discarding_an_unfinished_plan_cancels_it_and_a_busy_one_is_refused(demo: Demo) -> None:
    with held_by_another_thread(demo.base, demo.plan_id, "running", "discarding"):
        busy = demo.agents("plan", "discard", demo.plan_id, "--yes")
        assert busy.exit_code == 2 and "is busy" in busy.output
    with demo.store.unit_of_work() as uow:
        assert uow.plans.get(demo.plan_id).state.value == "awaiting_approval"
        children = uow.plans.children(demo.plan_id)

    child = demo.agents("plan", "discard", children[0].plan_id, "--yes")
    assert child.exit_code == 2
    assert f"agents plan discard {demo.plan_id}" in child.output

    done = demo.agents("plan", "discard", demo.plan_id, "--yes")
    assert done.exit_code == 0, done.output
    assert "cancels plan" in done.output
    with demo.store.unit_of_work() as uow:
        assert uow.plans.get(demo.plan_id).state.value == "cancelled"
        assert uow.approvals.pending(demo.plan_id) == []  # its Apply gate lapsed with it
    assert demo.ours() == []
    assert run_checks(demo.store, demo.base).problems == []


def test_gc_drops_superseded_checkpoints_and_keeps_what_corrections_need(demo: Demo) -> None:
    impact = preview(demo.store, demo.decision("record"), CorrectionMode.REVERT, "a patch release")
    execute(demo.store, impact, acknowledged=True, requested_by="li", options=demo.options)

    kept = demo.agents("gc")  # the default retention keeps everything this young
    assert kept.exit_code == 0 and "no checkpoints" in kept.output
    dry = demo.agents("--format=json", "gc", "--retention-days", "0", "--dry-run")
    assert dry.exit_code == 0, dry.output  # --dry-run, as other commands spell it: the default
    found = json.loads(dry.stdout)["checkpoints"]
    assert found and json.loads(dry.stdout)["applied"] is False
    with demo.store.unit_of_work() as uow:
        live = {c.checkpoint_id for c in uow.checkpoints.for_plan(demo.plan_id) if not c.pruned_at}
    assert {c["checkpoint_id"] for c in found} <= live  # a dry run removes nothing

    done = demo.agents("gc", "--retention-days", "0", "--apply")
    assert done.exit_code == 0, done.output
    assert f"removed {len(found)} checkpoints" in done.output
    again = demo.agents("--format=json", "gc", "--retention-days", "0")
    assert json.loads(again.stdout)["checkpoints"] == []
    assert demo.agents("gc", "--retention-days", "0", "--dry-run").output.startswith(
        "no checkpoints of superseded attempts"
    )
    assert run_checks(demo.store, demo.base).problems == []

    # The correction's guidance decision stands on the state the old `record` checkpointed
    # (engine/core/restore_point.py): gc kept it, so it can still be reverted, then applied.
    impact = preview(
        demo.store, demo.decision("correction:record"), CorrectionMode.REVERT, "a minor release"
    )
    result = execute(demo.store, impact, acknowledged=True, requested_by="li", options=demo.options)
    assert result.correction.status.value == "succeeded"
    applied = demo.agents("plan", "apply", demo.plan_id)
    assert applied.exit_code == 0, applied.output


def test_gc_lists_what_a_reading_of_the_whole_plan_finds(demo: Demo) -> None:
    """gc starts from the live checkpoints of superseded decisions and reads the current
    decisions' light rows only when there are some; what it lists is what reading every
    decision and checkpoint of the plan finds (the reading it made before), a kept restore
    point included."""
    record = demo.decision("record")
    impact = preview(demo.store, record, CorrectionMode.REVERT, "a patch release")
    execute(demo.store, impact, acknowledged=True, requested_by="li", options=demo.options)
    again = demo.decision("correction:record")  # its guidance stands on the old record's state
    impact = preview(demo.store, again, CorrectionMode.REVERT, "a minor release")
    execute(demo.store, impact, acknowledged=True, requested_by="li", options=demo.options)

    listed = demo.agents("--format=json", "gc", "--retention-days", "0")
    assert listed.exit_code == 0, listed.output
    found = {c["checkpoint_id"] for c in json.loads(listed.stdout)["checkpoints"]}
    with demo.store.unit_of_work() as uow:
        decisions = uow.decisions.for_plan(demo.plan_id)
        current = [d for d in decisions if d.superseded_by is None]
        keep = {d.decision_id for d in restore_points(uow, demo.plan_id, current).values()}
        superseded = {d.decision_id for d in decisions if d.superseded_by is not None}
        live = [
            c
            for c in uow.checkpoints.for_plan(demo.plan_id)
            if c.pruned_at is None
            and c.checkpoint_type is CheckpointType.DECISION_POINT
            and c.decision_id in superseded
        ]
    assert found == {c.checkpoint_id for c in live if c.decision_id not in keep}
    kept = {c.checkpoint_id for c in live if c.decision_id in keep}
    assert found and kept, (found, kept)  # both sides of the rule are exercised


def test_gc_refuses_a_retention_that_is_not_a_number(demo: Demo) -> None:
    for bad in ("-1", "two"):
        result = demo.agents("gc", "--retention-days", bad)
        assert result.exit_code == 2 and "whole number of days" in result.output
        stored = demo.agents("config", "set", "gc.retention_days", bad)
        assert stored.exit_code == 2
    assert demo.agents("config", "set", "gc.retention_days", "3").exit_code == 0
    assert "older than 3 days" in demo.agents("gc").output
