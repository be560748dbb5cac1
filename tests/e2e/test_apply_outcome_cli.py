"""What a person sees at the end of a run, through the CLI on the demo: where Apply landed,
exit 3 / 1 when it was refused / failed, and a denial that pauses instead of cancelling."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.cli import cli
from cleveragents_tui.domain.profile import AutomationProfile
from cleveragents_tui.failpoints import ENV_VAR
from cleveragents_tui.store.store import Store


class Agents:
    """``agents --db <tmp> ...`` in-process, with the test's own sandbox folder."""

    def __init__(self, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.home = home
        self.db = str(home / "agents.db")
        monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(home / "sandboxes"))
        monkeypatch.delenv(ENV_VAR, raising=False)

    def __call__(self, *args: str) -> Result:
        return CliRunner().invoke(cli, ["--db", self.db, *args], catch_exceptions=False)

    def demo(self, profile: str = "auto") -> str:
        made = self(
            "demo", "--no-tui", "--dir", str(self.home / "demo"), "--format=json",
            "--automation-profile", profile,
        )  # fmt: skip
        assert made.exit_code == 0, made.output
        plan_id: str = json.loads(made.stdout)["plan_id"]
        return plan_id

    def state(self, plan_id: str) -> str:
        shown = json.loads(self("plan", "list", "--format=json").stdout)["plans"]
        plan = next(p for p in shown if p["plan_id"] == plan_id)
        return f"{plan['phase']}/{plan['state']}"

    def pending(self, plan_id: str) -> list[dict[str, Any]]:
        listed = self("approval", "list", "--plan", plan_id, "--format=json").stdout
        approvals: list[dict[str, Any]] = json.loads(listed)["approvals"]
        return approvals


@pytest.fixture
def agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Agents:
    return Agents(tmp_path, monkeypatch)


def test_a_successful_apply_names_the_branch_and_how_to_merge_it(agents: Agents) -> None:
    from cleveragents_tui.engine.read.tui_queries import recent_events

    plan_id = agents.demo()
    applied = agents("plan", "apply", plan_id, "--as", "bob")
    assert applied.exit_code == 0, applied.output
    assert f"git merge cleveragents/apply/{plan_id}" in applied.stdout
    assert "landed:" in applied.stdout and "/docs:" in applied.stdout
    store = Store.open(agents.db)
    try:  # the app's status line names who applied it, as who answered the gate
        [landed] = [e for e in recent_events(store, plan_id) if e.kind == "plan_applied"]
    finally:
        store.close()
    assert landed.actor == "bob"


def test_an_apply_says_why_its_worktree_stays_and_how_to_remove_it(agents: Agents) -> None:
    """After Apply, `git worktree list` in the person's repository still shows the plan's
    sandbox (kept so the plan can be corrected); the landed lines said nothing of it."""
    plan_id = agents.demo()
    repo = agents.home / "demo" / "hello-cli"

    def worktrees() -> list[str]:
        listed = subprocess.run(
            ["git", "-C", str(repo), "worktree", "list", "--porcelain"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return [line for line in listed.stdout.splitlines() if line.startswith("worktree ")]

    applied = agents("plan", "apply", plan_id)
    assert applied.exit_code == 0, applied.output
    told = (
        "kept for corrections: its sandboxes and git worktrees; once you have merged, "
        f"agents plan discard {plan_id} removes them and its apply branches"
    )
    assert told in applied.stdout
    assert len(worktrees()) == 2  # the checkout, and the plan's sandbox
    discarded = agents("plan", "discard", plan_id, "--yes")
    assert discarded.exit_code == 0, discarded.output
    assert worktrees() == [f"worktree {repo}"]


def test_an_apply_run_after_its_gate_was_approved_is_logged_as_the_approvers(
    agents: Agents,
) -> None:
    from cleveragents_tui.engine.read.tui_queries import recent_events

    plan_id = agents.demo()
    [gate] = agents.pending(plan_id)
    assert agents("approval", "approve", gate["approval_id"], "--as", "carol").exit_code == 0
    assert agents("plan", "run", plan_id).exit_code == 0
    assert agents.state(plan_id) == "apply/applied"
    store = Store.open(agents.db)
    try:
        [landed] = [e for e in recent_events(store, plan_id) if e.kind == "plan_applied"]
    finally:
        store.close()
    assert landed.actor == "carol"


def test_a_refused_apply_exits_3_and_a_failed_one_exits_1_with_one_line(
    agents: Agents, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan_id = agents.demo()
    monkeypatch.setenv(ENV_VAR, "apply.resource=raise")
    failed = agents("plan", "apply", plan_id)
    assert failed.exit_code == 1, failed.output
    assert failed.stderr.count("\n") == 1
    assert f"plan {plan_id} was not applied (errored)" in failed.stderr
    monkeypatch.delenv(ENV_VAR)
    (tmp_path / "demo" / "docs" / "guide.md").write_text("someone else's guide\n")
    refused = agents("plan", "run", plan_id)
    assert refused.exit_code == 3, refused.output
    assert refused.stderr.count("\n") == 1 and "guide.md" in refused.stderr
    assert f"plan {plan_id} was not applied (constrained)" in refused.stderr
    assert agents.state(plan_id) == "apply/constrained"


def _apply_failures(agents: Agents, plan_id: str) -> list[dict[str, object]]:
    store = Store.open(agents.db)
    try:
        with store.unit_of_work() as uow:
            return uow.events.payloads(plan_id, "apply_failed")
    finally:
        store.close()


def test_a_refused_apply_gives_the_refusing_resources_own_fix_once(
    agents: Agents, tmp_path: Path
) -> None:
    """The real guide.md edited by hand: Apply refuses the docs resource. The apply_failed
    event records the problem and the fix apart, and the one line on stderr gives that
    resource's own fix, once, not the generic one."""
    plan_id = agents.demo()
    (tmp_path / "demo" / "docs" / "guide.md").write_text("someone else's guide\n")
    refused = agents("plan", "apply", plan_id)
    assert refused.exit_code == 3, refused.output
    [event] = _apply_failures(agents, plan_id)
    reason, fix = str(event["reason"]), str(event["fix"])
    assert "guide.md" in reason and fix not in reason
    assert "put those paths back as they were" in fix and "agents plan correct" in fix
    assert refused.stderr == (
        f"error: plan {plan_id} was not applied (constrained): {reason}: {fix}\n"
    )
    assert "put the real resource right" not in refused.stderr


def test_a_refusal_recorded_without_a_fix_gets_the_generic_one(
    agents: Agents, tmp_path: Path
) -> None:
    """An Apply refused by an earlier version recorded no fix (the reason held it): the
    generic fix is given — put the resource right and retry, or correct — naming the plan."""
    from cleveragents_tui.cli.outcome import NotApplied, refuse_unapplied

    plan_id = agents.demo()
    (tmp_path / "demo" / "docs" / "guide.md").write_text("someone else's guide\n")
    assert agents("plan", "apply", plan_id).exit_code == 3
    store = Store.open(agents.db)
    try:
        with store.unit_of_work(write=True) as uow:
            uow.events.append(
                "apply_failed",
                {"state": "constrained", "reason": "docs refused: guide.md changed"},
                plan_id=plan_id,
            )
            uow.commit()
            plan = uow.plans.get(plan_id)
        with pytest.raises(NotApplied) as caught:
            refuse_unapplied(store, plan)
    finally:
        store.close()
    assert caught.value.exit_code == 3
    assert str(caught.value) == (
        f"plan {plan_id} was not applied (constrained): docs refused: guide.md changed: put the "
        f"real resource right, then retry with agents plan run {plan_id}, or correct a "
        "decision (agents plan correct)"
    )


def test_denying_the_apply_gate_pauses_and_the_plan_can_be_corrected(agents: Agents) -> None:
    plan_id = agents.demo()
    [gate] = agents.pending(plan_id)
    assert gate["kind"] == "apply_gate"
    denied = agents("approval", "deny", gate["approval_id"], "--reason", "use a class")
    assert denied.exit_code == 0, denied.output
    assert "nothing was cancelled" in denied.stdout
    assert "agents plan correct DECISION --mode=revert" in denied.stdout
    assert f"agents plan cancel {plan_id}" in denied.stdout
    assert agents.state(plan_id) == "execute/paused"
    tree = json.loads(agents("plan", "tree", plan_id, "--format=json").stdout)["decisions"]
    strategy = next(d for d in tree if d["decision_type"] == "strategy_choice")
    corrected = agents(
        "plan", "correct", strategy["decision_id"], "--mode=revert", "--yes",
        "--guidance", "a greeter class with a configurable greeting",
    )  # fmt: skip
    assert corrected.exit_code == 0, corrected.output
    assert agents.state(plan_id) == "execute/awaiting_approval"  # at the new Apply gate
    [again] = agents.pending(plan_id)
    assert again["kind"] == "apply_gate"


def test_plan_show_of_a_paused_plan_names_the_ways_on(agents: Agents) -> None:
    """`plan show` of a plan paused on a denial lists what `approval deny` listed, and of a
    plan a person paused since, the run that goes on: it said `paused` and nothing more, so
    a person coming back to it had to find the commands again."""
    plan_id = agents.demo()
    [gate] = agents.pending(plan_id)
    denied = agents(
        "approval", "deny", gate["approval_id"], "--reason", "use a class", "--as", "al"
    )
    choices = denied.stdout.split("nothing was cancelled. Next:\n")[1].splitlines()
    assert len(choices) == 3, denied.stdout
    shown = agents("plan", "show", plan_id).stdout.splitlines()
    at = shown.index("paused       its question was denied by al: use a class. Next:")
    assert shown[at + 1 :] == choices
    assert agents("plan", "resume", plan_id).exit_code == 0  # asked again
    assert agents("plan", "pause", plan_id).exit_code == 0  # then paused by a person
    shown = agents("plan", "show", plan_id).stdout.splitlines()
    assert shown[-1] == f"paused       go on with agents plan run {plan_id}", shown
    assert not any("denied" in line for line in shown)


def test_after_denying_the_apply_gate_plan_apply_still_applies(agents: Agents) -> None:
    plan_id = agents.demo()
    [gate] = agents.pending(plan_id)
    agents("approval", "deny", gate["approval_id"], "--reason", "not yet")
    applied = agents("plan", "apply", plan_id)
    assert applied.exit_code == 0, applied.output
    assert agents.state(plan_id) == "apply/applied"


@pytest.mark.parametrize(
    "how", [("--choose", "2"), ("--guidance", "make it a configurable greeter class")]
)
def test_denying_a_decision_then_choosing_another_alternative(
    agents: Agents, how: tuple[str, str]
) -> None:
    store = Store.open(agents.db)
    data = ProfileRegistry.builtins()["auto"].model_dump(mode="python")
    data.update(name="local/ask-strategy", description="auto, asking each Strategize decision")
    data["edit_code"] = 1.0
    ProfileRegistry(store).add(AutomationProfile.model_validate(data))
    store.close()
    plan_id = agents.demo("local/ask-strategy")
    [invariant] = agents.pending(plan_id)  # the first Strategize decision: keep the API
    agents("approval", "approve", invariant["approval_id"])
    assert agents("plan", "run", plan_id).exit_code == 0
    [strategy] = agents.pending(plan_id)
    assert "A plain function" in strategy["question"]
    denied = agents("approval", "deny", strategy["approval_id"], "--reason", "want a class")
    assert denied.exit_code == 0, denied.output
    assert f"agents plan resume {plan_id} --choose N" in denied.stdout
    assert "2. A greeter class with a configurable greeting" in denied.stdout
    assert agents.state(plan_id) == "strategize/paused"
    chose = agents("plan", "resume", plan_id, *how)
    assert chose.exit_code == 0, chose.output
    [asked] = agents.pending(plan_id)  # the new choice goes through the same gate
    assert "A greeter class" in asked["question"]
    agents("approval", "approve", asked["approval_id"])
    assert agents("plan", "run", plan_id).exit_code == 0
    tree = json.loads(agents("plan", "tree", plan_id, "--format=json").stdout)["decisions"]
    chosen = {d["decision_type"]: d["chosen_option"] for d in tree}
    assert chosen["strategy_choice"] == "A greeter class with a configurable greeting"
    assert agents("plan", "resume", plan_id, "--choose", "9").exit_code == 2  # not paused


def test_an_apply_whose_sandbox_was_deleted_says_which_folder_and_what_to_do(
    agents: Agents,
) -> None:
    """The app database's sandbox folder deleted by hand: Apply is refused (exit 3) in one
    line that names the sandbox folder it looked in and both ways on — the right
    AGENTS_SANDBOX_DIR, or discarding the plan — and the discard it names works."""
    plan_id = agents.demo()
    base = agents.home / "sandboxes"
    [folder] = [f for f in (base / plan_id).iterdir() if f.name.endswith("__app-db")]
    shutil.rmtree(folder)
    refused = agents("plan", "apply", plan_id)
    assert refused.exit_code == 3, refused.output
    [line] = refused.stderr.splitlines()
    assert f"has no sandbox of {folder.name.replace('__', '/')} in {base}" in line, line
    assert "set AGENTS_SANDBOX_DIR to it and retry" in line
    assert line.endswith(f"agents plan discard {plan_id}, then start the plan again"), line
    discarded = agents("plan", "discard", plan_id, "--yes")
    assert discarded.exit_code == 0, discarded.output
    assert not (base / plan_id).exists() or not any((base / plan_id).iterdir())


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("harm", ["damaged", "deleted"])
def test_a_broken_database_sandbox_refuses_apply_before_anything_lands(
    agents: Agents, harm: str
) -> None:
    """The app database's sandbox state file damaged or deleted by hand: Apply is refused
    (exit 3) before the docs child plan or any other resource lands, in one line whose fix
    is a command, and the discard it names works."""
    plan_id = agents.demo()
    docs = agents.home / "demo" / "docs"
    before = _files(docs)
    [child] = [
        p["plan_id"]
        for p in json.loads(agents("plan", "list", "--format=json").stdout)["plans"]
        if p["plan_id"] != plan_id
    ]
    [folder] = [f for f in (agents.home / "sandboxes" / plan_id).iterdir() if "app-db" in f.name]
    state_file = folder / "sqlite_copy.json"
    if harm == "damaged":
        state_file.write_text("{")
    else:
        state_file.unlink()
    refused = agents("plan", "apply", plan_id)
    assert refused.exit_code == 3, refused.output
    [line] = refused.stderr.splitlines()
    assert f"plan {plan_id} was not applied (constrained)" in line, line
    assert "damaged" in line if harm == "damaged" else "no database sandbox of" in line, line
    assert line.endswith(f"agents plan discard {plan_id}, then start the plan again"), line
    assert _files(docs) == before  # the child plan's guide did not land
    assert agents.state(child) == "execute/completed"
    branches = subprocess.run(
        ["git", "branch", "--list", "cleveragents/apply/*"],
        cwd=agents.home / "demo" / "hello-cli", capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert branches.stdout == ""  # nor the repository's branch
    discarded = agents("plan", "discard", plan_id, "--yes")
    assert discarded.exit_code == 0, discarded.output
    assert agents.state(plan_id) == "apply/cancelled"
