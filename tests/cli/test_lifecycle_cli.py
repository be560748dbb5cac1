"""`agents demo`, `plan use`, and the lifecycle commands as a user drives them."""

from __future__ import annotations

import getpass
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from tests.cli.conftest import Run
from tests.support.cli_output import heading_plan_id
from tests.support.scale_plan import build


@pytest.fixture
def sandboxes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return tmp_path / "sandboxes"


def test_demo_json_names_the_plan_and_where_everything_is(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    result = run("demo", "--dir", str(tmp_path / "demo"), "--format=json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["format"] == "cleveragents.demo/1"
    assert (doc["phase"], doc["state"]) == ("execute", "awaiting_approval")
    assert Path(doc["directory"], "hello-cli", ".git").is_dir()
    assert doc["database_url"].startswith("sqlite:///")
    tree = json.loads(run("plan", "tree", doc["plan_id"], "--format=json").output)
    assert tree["decisions"][0]["decision_type"] == "prompt_definition"


@pytest.mark.parametrize(
    ("profile", "last"),
    [
        ("auto", "agents plan apply {plan}"),  # at the Apply gate: land it
        ("supervised", "agents approval list"),  # at a spawn gate: apply would refuse
    ],
)
def test_demos_next_steps_end_with_what_the_plan_waits_for(
    run: Run, tmp_path: Path, sandboxes: Path, profile: str, last: str
) -> None:
    result = run("demo", "--dir", str(tmp_path / "demo"), "--automation-profile", profile)
    assert result.exit_code == 0, result.output
    plan = heading_plan_id(result.output.split("\n", 1)[1])  # after "Demo project in ..."
    steps = result.output.split("\nNext:\n")[1]
    assert last.format(plan=plan) in steps
    assert ("agents plan apply" in steps) is (profile == "auto"), steps


@pytest.mark.parametrize("profile", ["auto", "supervised"])
def test_plan_show_says_what_the_plan_waits_for_and_how_to_answer(
    run: Run, tmp_path: Path, sandboxes: Path, profile: str
) -> None:
    """`plan show` of a waiting plan ends as the run that left it so ended: each question
    with the command that answers it, and at the Apply gate how to review and land it; of
    an applied plan, where it landed. It said `approvals    1 pending` and nothing more."""
    result = run("demo", "--dir", str(tmp_path / "demo"), "--automation-profile", profile)
    plan = heading_plan_id(result.output.split("\n", 1)[1])
    [asked] = _pending(run)
    shown = run("plan", "show", plan).output.split("\nnext\n")[1].splitlines()
    assert shown[0] == (
        f"  waiting for: {asked['question']}  (agents approval approve {asked['approval_id']})"
    )
    landing = f"  review it: agents plan tree {plan}; land it: agents plan apply {plan}"
    assert (landing in shown) is (profile == "auto"), shown
    if profile != "auto":
        run("plan", "cancel", plan)
        cancelled = run("plan", "show", plan).output
        assert "\nnext\n" not in cancelled and "\napplied\n" not in cancelled
        return
    # applied: where it landed and how to take it, until discarded (its branch goes too)
    run("plan", "apply", plan)
    applied = run("plan", "show", plan).output.split("\napplied\n")[1].splitlines()
    merge = f"review and merge it with `git merge cleveragents/apply/{plan}`"
    assert any(line.startswith("  landed: ") and merge in line for line in applied), applied
    assert applied[-1].startswith("  kept for corrections: "), applied
    run("plan", "discard", plan, "--yes")
    discarded = run("plan", "show", plan).output.split("\napplied\n")[1].splitlines()
    assert discarded == [
        "  discarded: its sandboxes, git worktrees and apply branches were removed"
    ]


def test_demo_refuses_a_folder_that_is_not_empty(run: Run, tmp_path: Path, sandboxes: Path) -> None:
    folder = tmp_path / "busy"
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    result = run("demo", "--dir", str(folder))
    assert result.exit_code == 2
    assert "is not empty" in result.stderr
    assert (folder / "keep.txt").read_text() == "mine"


def test_plan_use_with_a_manual_profile_waits_before_strategize(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    demo = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)
    action = Path(demo["action_file"])
    result = run("plan", "use", str(action), "--automation-profile", "manual")
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert "strategize · awaiting_approval" in first
    assert "Start Strategize for this plan?" in result.output
    plan_id = heading_plan_id(first)
    paused = run("plan", "pause", plan_id)
    assert "paused" in paused.output.splitlines()[0]
    again = run("plan", "pause", plan_id)
    assert again.exit_code == 2 and "cannot be paused" in again.stderr
    cancelled = run("plan", "cancel", plan_id)
    assert "cancelled" in cancelled.output.splitlines()[0]
    resumed = run("plan", "run", plan_id)
    assert resumed.exit_code == 2 and "is cancelled" in resumed.stderr


def test_plan_use_reports_a_failed_preflight_in_one_line(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    action = tmp_path / "bad.yaml"
    action.write_text("name: local/bad\nprompt: do it\ntools: [local/teleport]\n")
    result = run("plan", "use", str(action))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: pre-flight check 'skill and tool existence' failed: tool local/teleport is not "
        "registered: register the tool or remove it from the action"
    )
    assert "No plans yet" in run("plan", "list").output
    missing = run("plan", "use", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2 and "no action file or registered action" in missing.stderr


def test_plan_use_whose_sandbox_cannot_be_made_ends_errored_with_the_reason(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    """Pre-flight passes (it is a git repository) but its sandbox cannot be made (no commit
    yet): the plan ends errored, not `running`, and says why; fixed, `plan run` goes on."""
    demo = json.loads(
        run(
            "demo", "--dir", str(tmp_path / "demo"), "--automation-profile", "manual",
            "--format=json",
        ).output
    )  # fmt: skip
    repo = Path(demo["directory"], "hello-cli")
    shutil.rmtree(repo)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)

    result = run("plan", "use", demo["action_file"], "--automation-profile", "auto")

    assert result.exit_code == 2
    [line] = result.stderr.strip().splitlines()
    plans = json.loads(run("plan", "list", "--format=json").output)["plans"]
    plan_id = plans[-2]["plan_id"]  # the new plan, then its child
    assert line.startswith(f"error: plan {plan_id} errored: ")
    assert "has no commits yet" in line and f"agents plan run {plan_id}" in line
    shown = json.loads(run("plan", "show", plan_id, "--format=json").output)
    assert (shown["plan"]["phase"], shown["plan"]["state"]) == ("execute", "errored")
    assert "has no commits yet" in shown["error"]
    assert "has no commits yet" in run("plan", "show", plan_id).output
    assert run("doctor").exit_code == 0  # nothing is left `running`

    (repo / "hello_cli").mkdir()
    (repo / "hello_cli" / "app.py").write_text(
        'COMMANDS = {"version": lambda args: print("hello-cli 1.0.0")}\n'
    )
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    again = run("plan", "run", plan_id)
    assert again.exit_code == 0, again.output
    assert "execute · awaiting_approval" in again.output.splitlines()[0]
    assert json.loads(run("plan", "show", plan_id, "--format=json").output)["error"] is None


def test_a_child_plan_whose_sandbox_cannot_be_made_errors_its_parent_too(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    demo = json.loads(
        run(
            "demo", "--dir", str(tmp_path / "demo"), "--automation-profile", "manual",
            "--format=json",
        ).output
    )  # fmt: skip
    fifo = Path(demo["directory"], "docs", "pipe")  # the child plan's folder: not copyable
    os.mkfifo(fifo)

    result = run("plan", "use", demo["action_file"], "--automation-profile", "auto")

    assert result.exit_code == 2
    plans = json.loads(run("plan", "list", "--format=json").output)["plans"]
    parent, child = plans[-2:]
    assert [parent["state"], child["state"]] == ["errored", "errored"]
    [line] = result.stderr.strip().splitlines()
    assert "the sandbox of " in line and "/docs could not be made" in line
    assert f"agents plan run {parent['plan_id']}" in line  # the plan the user ran
    shown = json.loads(run("plan", "show", parent["plan_id"], "--format=json").output)
    assert "could not be made" in shown["error"] and "FIFO" in shown["error"]
    assert run("doctor").exit_code == 0

    fifo.unlink()
    again = run("plan", "run", parent["plan_id"])
    assert again.exit_code == 0, again.output
    plans = json.loads(run("plan", "list", "--format=json").output)["plans"]
    assert [p["state"] for p in plans[-2:]] == ["awaiting_approval", "completed"]


def test_set_profile_changes_an_open_plan_and_refuses_a_cancelled_one(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    demo = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)
    plan_id = demo["plan_id"]
    changed = run("plan", "set-profile", plan_id, "supervised")
    assert changed.exit_code == 0, changed.output
    shown = json.loads(run("plan", "show", plan_id, "--format=json").output)
    assert shown["plan"]["automation_profile"] == "supervised"

    unknown = run("plan", "set-profile", plan_id, "local/nope")
    assert unknown.exit_code == 2
    assert "no automation profile named 'local/nope'" in unknown.stderr
    assert "supervised" in run("plan", "show", plan_id).output  # unchanged

    assert run("plan", "cancel", plan_id).exit_code == 0
    refused = run("plan", "set-profile", plan_id, "manual")
    assert refused.exit_code == 2
    assert "is cancelled" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    shown = json.loads(run("plan", "show", plan_id, "--format=json").output)
    assert shown["plan"]["automation_profile"] == "supervised"


def test_a_cancelled_plan_asks_nothing_and_is_never_applied(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    """Before: the Apply gate of a cancelled plan stayed pending (`approval list`, and
    `plan cancel` still said "waiting for ... land it: agents plan apply"); `plan apply`
    then recorded it approved before refusing with "run it: agents plan run", which is
    refused in turn."""
    demo = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)
    plan_id = demo["plan_id"]
    cancelled = run("plan", "cancel", plan_id)
    assert cancelled.exit_code == 0, cancelled.output
    assert "waiting for" not in cancelled.output and "plan apply" not in cancelled.output
    assert json.loads(run("approval", "list", "--format=json").output)["approvals"] == []
    answered = run("approval", "list", "--all", "--format=json").output

    plan = json.loads(run("plan", "show", plan_id, "--format=json").output)["plan"]
    applied = run("plan", "apply", plan_id)
    assert applied.exit_code == 2
    assert applied.stderr.strip() == (
        f"error: plan {plan_id} is cancelled: a cancelled plan is never applied: start a new "
        f"plan with `agents plan use {plan['action']}`"
    )
    assert run("approval", "list", "--all", "--format=json").output == answered
    [gate] = json.loads(answered)["approvals"]
    assert (gate["kind"], gate["answer"], gate["answered_by"]) == (
        "apply_gate",
        "denied",
        "cancelled",
    )
    branches = subprocess.run(
        ["git", "branch", "--list", "cleveragents/apply/*"],
        cwd=Path(demo["directory"], "hello-cli"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert branches.stdout == ""


def test_apply_of_an_applied_plan_says_so(run: Run, tmp_path: Path, sandboxes: Path) -> None:
    demo = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)
    plan_id = demo["plan_id"]
    assert run("plan", "apply", plan_id).exit_code == 0
    again = run("plan", "apply", plan_id)
    assert again.exit_code == 2
    assert again.stderr.strip() == (
        f"error: plan {plan_id} is applied already: see where it landed with "
        f"`agents plan show {plan_id}`"
    )


def test_apply_of_a_paused_plan_is_refused_and_answers_nothing(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    """Before: `plan apply` of a plan paused at its Apply gate recorded the gate approved,
    then refused ("Execute has not completed: run it until it waits at the Apply gate"), and
    the `plan run` it named applied the plan without waiting at the gate."""
    demo = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)
    plan_id = demo["plan_id"]
    assert run("plan", "pause", plan_id).exit_code == 0
    asked = run("approval", "list", "--all", "--format=json").output

    refused = run("plan", "apply", plan_id)
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (
        f"error: plan {plan_id} is paused: resume it first (agents plan resume {plan_id}), "
        "then apply it"
    )
    assert run("approval", "list", "--all", "--format=json").output == asked
    resumed = run("plan", "resume", plan_id)
    assert "execute · awaiting_approval" in resumed.output.splitlines()[0]  # at the gate again
    applied = run("plan", "apply", plan_id)
    assert applied.exit_code == 0 and "apply · applied" in applied.output.splitlines()[0]


def _pending(run: Run) -> list[dict[str, str]]:
    listed = json.loads(run("approval", "list", "--format=json").output)
    approvals: list[dict[str, str]] = listed["approvals"]
    return approvals


def test_a_child_cancelled_by_its_parents_correction_asks_nothing(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    """Before: the child plan was cancelled but its phase gate stayed pending in
    `approval list` (and could be approved), unlike a plan cancelled by `plan cancel`."""
    demo = run(
        "demo", "--dir", str(tmp_path / "demo"), "--automation-profile=supervised", "--format=json"
    )
    plan_id = json.loads(demo.output)["plan_id"]
    for _ in range(2):  # the spawn, then the parent's phase gate: the child then waits too
        [gate] = _pending(run)
        assert run("approval", "approve", gate["approval_id"]).exit_code == 0
        assert run("plan", "run", plan_id).exit_code == 0
    [child] = [
        p
        for p in json.loads(run("plan", "list", "--format=json").output)["plans"]
        if p["parent_plan_id"] == plan_id
    ]
    [child_gate] = [a for a in _pending(run) if a["plan_id"] == child["plan_id"]]
    tree = json.loads(run("plan", "tree", plan_id, "--format=json").output)["decisions"]
    [spawn] = [d["decision_id"] for d in tree if d["decision_type"] == "subplan_spawn"]

    corrected = run(
        "plan", "correct", spawn, "--mode=revert", "--guidance", "again", "--choose", "1", "--yes"
    )
    assert corrected.exit_code == 0, corrected.output
    shown = json.loads(run("plan", "show", child["plan_id"], "--format=json").output)["plan"]
    assert shown["state"] == "cancelled"
    assert [a for a in _pending(run) if a["plan_id"] == child["plan_id"]] == []
    answered = json.loads(run("approval", "list", "--all", "--format=json").output)["approvals"]
    [lapsed] = [a for a in answered if a["approval_id"] == child_gate["approval_id"]]
    assert (lapsed["answer"], lapsed["answered_by"]) == ("denied", "correction")
    assert "cancelled by its parent's correction" in lapsed["reason"]


def test_doctor_shows_twenty_problems_of_a_kind_then_how_many_more(tmp_path: Path) -> None:
    """A store broken one way (here: Execute decisions written without their checkpoint
    groups) reports each; the text shows 20 of a check and says how many more, the JSON
    lists them all."""
    scale = build(tmp_path / "plan", 100)
    scale.store.close()
    db = str(tmp_path / "plan" / "agents.db")
    env = {"AGENTS_SANDBOX_DIR": str(tmp_path / "plan" / "sandboxes")}
    listed = CliRunner().invoke(cli, ["--db", db, "--format=json", "doctor"], env=env)
    problems = json.loads(listed.stdout)["problems"]
    assert listed.exit_code == 1 and len(problems) > 20
    assert {p["check"] for p in problems} == {"execute-group"}
    shown = CliRunner().invoke(cli, ["--db", db, "doctor"], env=env)
    assert shown.exit_code == 1
    lines = shown.stdout.splitlines()
    assert lines[:20] == [
        f"{p['check']}: {p['subject']}: {p['message']} ({p['fix']})" for p in problems[:20]
    ]
    assert lines[20:] == [
        f"execute-group: … and {len(problems) - 20} more "
        "(agents doctor --format=json lists them all)"
    ]


def test_a_childs_question_is_answered_once_not_again_for_its_parent(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    """Under a profile that asks at every gate, the parent's run waits on its child plan's
    questions without asking one of its own: each is answered once, then `plan run` of the
    parent goes on. Before, every gate of the child also asked the parent "Child plan C
    stopped in awaiting_approval; resume it, then approve to continue" — two approvals a
    gate, and the one the parent showed was not the one that mattered."""
    demo = run(
        "demo", "--dir", str(tmp_path / "demo"), "--automation-profile=supervised", "--format=json"
    )
    plan_id = json.loads(demo.output)["plan_id"]
    answered = []
    seen_child_question = False
    for _ in range(30):  # a bound: the demo asks about a dozen questions
        pending = _pending(run)
        assert len(pending) == 1, pending  # one question at a time, never a parent's echo
        [asked] = pending
        if asked["kind"] == "apply_gate":
            break
        assert "stopped in" not in asked["question"]
        answered.append(asked["kind"])
        approved = run("approval", "approve", asked["approval_id"])
        assert f"continue the plan with `agents plan run {plan_id}`" in approved.output
        went_on = run("plan", "run", plan_id)
        assert went_on.exit_code == 0, went_on.output
        waits = [line for line in went_on.output.splitlines() if "waiting for:" in line]
        assert len(waits) == 1, went_on.output
        if "waiting for: child plan " in waits[0]:
            seen_child_question = True  # and `plan show` counts it, not "0 pending" alone
            shown = run("plan", "show", plan_id).output
            assert "approvals    0 pending, 1 in its child plans" in shown, shown
    else:
        raise AssertionError(f"never reached the Apply gate after {answered}")
    assert seen_child_question  # the parent's line named its child's question
    assert answered.count("spawn") == 1  # the spawn itself, asked once
    applied = run("plan", "apply", plan_id)
    assert applied.exit_code == 0, applied.output
    assert _childs_docs_landed(applied.output)


def test_a_child_run_on_its_own_names_the_parent_that_lands_it(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    """A person who answers a child plan's question and runs the child itself gets it to
    the end of its run; the parent still waits, with nothing to answer. Before, the child's
    line stopped there and `approval list` said "No pending approvals": nothing named the
    parent's `plan run` that goes on and lands both."""
    demo = run(
        "demo", "--dir", str(tmp_path / "demo"), "--automation-profile=supervised", "--format=json"
    )
    plan_id = json.loads(demo.output)["plan_id"]
    goes_on = f"go on with agents plan run {plan_id}"
    child_finished = False
    for _ in range(30):  # a bound: the demo asks about a dozen questions
        [asked] = _pending(run)
        if asked["kind"] == "apply_gate":
            break
        run("approval", "approve", asked["approval_id"])
        if asked["plan_id"] == plan_id:
            run("plan", "run", plan_id)
            continue
        alone = run("plan", "run", asked["plan_id"])  # the child, on its own
        assert alone.exit_code == 0, alone.output
        if " completed " not in alone.output.splitlines()[0]:
            continue  # at its next question
        assert f"lands with its parent plan: {goes_on}" in alone.output
        assert _pending(run) == []
        listed = run("approval", "list").output.splitlines()  # nothing to answer, not done
        assert listed[0] == "No pending approvals."
        assert [line.split(" (")[0] for line in listed[1:]] == [f"plan {plan_id}"]
        assert listed[1].endswith(f"waits with nothing left to answer: {goes_on}")
        parent = run("plan", "set-profile", plan_id, "supervised")  # its line, unchanged
        assert f"nothing left to answer: {goes_on}" in parent.output
        shown = run("plan", "show", plan_id).output
        assert f"approvals    0 pending: nothing left to answer, {goes_on}" in shown, shown
        _named_beside_another_plans_question(run, tmp_path, plan_id)
        run("plan", "run", plan_id)
        child_finished = True
    else:
        raise AssertionError("never reached the Apply gate")
    assert child_finished
    applied = run("plan", "apply", plan_id)
    assert applied.exit_code == 0, applied.output
    assert "add-greeting" in applied.output  # the parent's branch, child's docs with it
    assert _childs_docs_landed(applied.output)


def _named_beside_another_plans_question(run: Run, tmp_path: Path, plan_id: str) -> None:
    """With another plan's question pending, `approval list` names that question and still
    the plan that waits with nothing left to answer: it named the waiting plan only when
    nothing was pending anywhere."""
    other = run(
        "demo",
        "--dir",
        str(tmp_path / "other"),
        "--automation-profile=supervised",
        "--format=json",
    )
    other_id = json.loads(other.output)["plan_id"]
    [asked] = _pending(run)
    assert asked["plan_id"] != plan_id
    listed = run("approval", "list").output.splitlines()
    assert listed[0].startswith(f"{asked['approval_id']}  "), listed
    ready = [line for line in listed if "waits with nothing left to answer" in line]
    assert [line.split(" (")[0] for line in ready] == [f"plan {plan_id}"], listed
    assert run("plan", "list").output.splitlines()[-1] == ready[0]  # and under the plans
    assert run("plan", "cancel", other_id).exit_code == 0


@pytest.mark.parametrize("way_on", ["run the child", "approve the parent's question"])
def test_a_child_paused_on_its_own_goes_on_with_one_step(
    run: Run, tmp_path: Path, sandboxes: Path, way_on: str
) -> None:
    """A child paused on its own makes its parent's run ask to run it on: running the child
    on answers the question, and approving it runs the child on with the parent. Before,
    the question said "resume it, then approve to continue": two steps for one thing, and
    approving alone just asked again."""
    demo = run(
        "demo", "--dir", str(tmp_path / "demo"), "--automation-profile=supervised", "--format=json"
    )
    plan_id = json.loads(demo.output)["plan_id"]
    for _ in range(30):  # a bound: the demo asks about a dozen questions
        [asked] = _pending(run)
        assert asked["kind"] != "apply_gate", "never stopped at a child plan's question"
        if asked["plan_id"] != plan_id:
            break
        run("approval", "approve", asked["approval_id"])
        run("plan", "run", plan_id)
    child = asked["plan_id"]
    assert run("plan", "pause", child).exit_code == 0  # a person pauses the child alone
    parent = run("plan", "run", plan_id)
    said = "stopped in paused; approve to run it on with this plan, or run it on alone: "
    assert f"{said}agents plan run {child}" in parent.output
    [question] = [a for a in _pending(run) if a["plan_id"] == plan_id]
    if way_on == "run the child":
        assert run("plan", "run", child).exit_code == 0
    else:
        assert run("approval", "approve", question["approval_id"]).exit_code == 0
        assert run("plan", "run", plan_id).exit_code == 0
    assert _pending(run) == [asked]  # the child's own question again; the parent's answered
    answered = json.loads(run("approval", "list", "--all", "--format=json").output)["approvals"]
    [parents] = [a for a in answered if a["approval_id"] == question["approval_id"]]
    assert (parents["answer"], parents["answered_by"]) == ("approved", getpass.getuser())
    for _ in range(30):
        [asked] = _pending(run)
        if asked["kind"] == "apply_gate":
            break
        run("approval", "approve", asked["approval_id"])
        run("plan", "run", plan_id)
    applied = run("plan", "apply", plan_id)
    assert applied.exit_code == 0, applied.output
    assert _childs_docs_landed(applied.output)


def _childs_docs_landed(output: str) -> bool:
    """The child plan's work (the user guide, in the demo's docs folder) landed with the
    parent's Apply: what the person who ran the family on gets."""
    return any(
        line.startswith("  landed: ") and "/docs: 1 change copied to " in line
        for line in output.splitlines()
    )


def test_pausing_a_plan_at_its_gate_says_how_to_go_on_not_how_to_land_it(
    run: Run, tmp_path: Path, sandboxes: Path
) -> None:
    """`plan apply` refuses a paused plan; its pause used to end with `land it: agents plan
    apply P` all the same."""
    demo = run("demo", "--dir", str(tmp_path / "demo"), "--format=json")
    plan_id = json.loads(demo.output)["plan_id"]
    paused = run("plan", "pause", plan_id)
    assert paused.exit_code == 0, paused.output
    assert f"paused: go on with agents plan run {plan_id}" in paused.output
    assert "land it:" not in paused.output
    assert run("plan", "apply", plan_id).exit_code == 2  # as the line says
    went_on = run("plan", "run", plan_id)
    assert f"land it: agents plan apply {plan_id}" in went_on.output
