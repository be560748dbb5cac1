"""`agents --progress`: each decision and step on stderr while a plan runs or a correction
replays, checked against the plan's tree afterwards — every decision the run recorded named
once, in order, with its phase, type and choice — and off when stderr is not a terminal."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Run

DECISION = re.compile(
    r"^  (?:\[(?P<plan>[\w -]+)\] )?#(?P<seq>\d+) (?P<phase>\w+) (?P<type>\w+): (?P<chosen>.*)$"
)


@pytest.fixture(autouse=True)
def sandboxes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return tmp_path / "sandboxes"


def _decision_lines(
    stderr: str, root: str, children: dict[str, str] | None = None
) -> list[tuple[str, int, str, str, str]]:
    """(plan, sequence, phase, type, choice shown) of each decision line, in order; a child
    plan's lines by the id ``children`` maps its label to, else by the label."""
    found = []
    for line in stderr.splitlines():
        match = DECISION.match(line)
        if match:
            label = match["plan"]
            plan = (children or {}).get(label, label) if label else root
            chosen = match["chosen"].removesuffix(" (re-made)")
            found.append((plan, int(match["seq"]), match["phase"], match["type"], chosen))
    return found


def _tree(run: Run, plan_id: str) -> list[dict[str, Any]]:
    shown = run("plan", "tree", plan_id, "--show-superseded", "--format=json")
    return list(json.loads(shown.output)["decisions"])


def _plans(run: Run) -> tuple[str, str]:
    plans = json.loads(run("plan", "list", "--format=json").output)["plans"]
    top = next(p for p in plans if p["parent_plan_id"] is None)
    child = next(p for p in plans if p["parent_plan_id"] == top["plan_id"])
    return top["plan_id"], child["plan_id"]


def _same(shown: tuple[str, int, str, str, str], decision: dict[str, Any], plan: str) -> bool:
    """The line names this decision: its plan, sequence, phase and type; its choice as
    recorded, or cut short with an ellipsis."""
    plan_shown, seq, phase, kind, chosen = shown
    recorded = decision["chosen_option"]
    whole = chosen == recorded or (
        chosen.endswith("…") and recorded.startswith(chosen.removesuffix("…"))
    )
    return (plan_shown, seq, phase, kind) == (
        plan,
        decision["sequence_number"],
        decision["phase"],
        decision["decision_type"],
    ) and whole


def test_a_runs_progress_names_every_decision_once_in_order(run: Run, tmp_path: Path) -> None:
    ran = run("--progress", "demo", "--dir", str(tmp_path / "demo"), "--no-tui")
    assert ran.exit_code == 0, ran.output
    top, child = _plans(run)
    shown = _decision_lines(ran.stderr, top, {"write-docs": child})
    for plan in (top, child):
        recorded = _tree(run, plan)
        lines = [line for line in shown if line[0] == plan]
        assert len(lines) == len(recorded), (plan, lines)
        for line, decision in zip(lines, recorded, strict=True):
            assert _same(line, decision, plan), (line, decision)
    # the phase changes where they happened: after Strategize's decisions, before Execute's
    stderr = ran.stderr.splitlines()
    to_execute = stderr.index("  · now execute · running")
    root_lines = [i for i, line in enumerate(stderr) if DECISION.match(line) and "[" not in line]
    phases = [DECISION.match(stderr[i])["phase"] for i in root_lines]  # type: ignore[index]
    assert phases == sorted(phases, key=["strategize", "execute"].index)
    assert all(
        (i < to_execute) == (phase == "strategize")
        for i, phase in zip(root_lines, phases, strict=True)
    )
    assert f"  · child plan {child} started (demo-" in ran.stderr
    assert "  [write-docs] · now execute · completed" in ran.stderr
    assert stderr[-1] == "  · now execute · awaiting_approval"


CALL = re.compile(
    r"^  (?:\[(?P<plan>[\w -]+)\] )?  (?P<mark>[✓✗]) (?P<tool>[\w/-]+): (?P<first>.*)$"
)


def test_each_decisions_calls_are_shown_beneath_it_once(run: Run, tmp_path: Path) -> None:
    """Under each decision's line, its tool calls as `plan explain` lists them — the tool,
    ✓ or ✗ and its output's first line — in the order they ran, each once: a model's reads
    and edits were seen only afterwards."""
    ran = run("--progress", "demo", "--dir", str(tmp_path / "demo"), "--no-tui")
    assert ran.exit_code == 0, ran.output
    top, child = _plans(run)
    shown: dict[str, list[tuple[int, list[tuple[str, str, str]]]]] = {top: [], child: []}
    for line in ran.stderr.splitlines():
        decision, call = DECISION.match(line), CALL.match(line)
        if decision is not None:
            plan = child if decision["plan"] else top
            shown[plan].append((int(decision["seq"]), []))
        elif call is not None:
            plan = child if call["plan"] else top
            shown[plan][-1][1].append((call["mark"], call["tool"], call["first"]))
    calls = 0
    for plan in (top, child):
        for recorded in _tree(run, plan):
            sequence, lines = shown[plan].pop(0)
            assert sequence == recorded["sequence_number"]
            explained = run("plan", "explain", recorded["decision_id"], "--format=json")
            made = json.loads(explained.output)["tool_invocations"]
            assert lines == [
                ("✓" if c["ok"] else "✗", c["tool"], c["output"].splitlines()[0]) for c in made
            ], recorded
            calls += len(made)
    assert calls == 7  # the demo's two plans: a guide, greet.py and app.py, a test run…
    assert "    ✓ local/run-tests: exit status 0" in ran.stderr.splitlines()


def test_no_progress_unless_asked_when_stderr_is_not_a_terminal(run: Run, tmp_path: Path) -> None:
    quiet = run("demo", "--dir", str(tmp_path / "one"), "--no-tui")
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == ""
    hidden = run("--no-progress", "demo", "--dir", str(tmp_path / "two"), "--no-tui")
    assert hidden.exit_code == 0, hidden.output
    assert hidden.stderr == ""
    after = run("--progress", "demo", "--dir", str(tmp_path / "three"), "--no-tui", "--no-progress")
    assert after.exit_code == 0, after.output  # the later one wins, as typed
    assert after.stderr == ""


def test_a_corrections_progress_shows_the_rollback_and_each_decision_remade(
    run: Run, tmp_path: Path
) -> None:
    ran = run("demo", "--dir", str(tmp_path / "demo"), "--format=json")
    top = json.loads(ran.output)["plan_id"]
    before = _tree(run, top)
    strategy = next(d for d in before if d["decision_type"] == "strategy_choice")
    corrected = run(
        "--progress", "plan", "correct", strategy["decision_id"], "--mode=revert",
        "--guidance", "use a greeter class", "--yes", "--as", "alice",
    )  # fmt: skip
    assert corrected.exit_code == 0, corrected.output
    correction = re.search(r"^correction (\w+): succeeded", corrected.stdout, re.M)
    assert correction is not None, corrected.stdout
    after = _tree(run, top)
    new = [d for d in after if d["sequence_number"] > max(b["sequence_number"] for b in before)]
    superseded = [d for d in after if d["superseded_by"] and not _was_superseded(before, d)]
    lines = [line for line in _decision_lines(corrected.stderr, top) if line[0] == top]
    assert len(lines) == len(new) > 0
    for line, decision in zip(lines, new, strict=True):
        assert _same(line, decision, top), (line, decision)
        assert decision["is_correction"] is True
    stderr = corrected.stderr.splitlines()
    ordered = [
        f"  · correction {correction[1]} started (revert)",
        next(line for line in stderr if line.startswith("  · rolled back: ")),
        f"  · {len(superseded)} decisions superseded; reasoning restored to before it",
        f"  · correction {correction[1]} finished (succeeded)",
    ]
    assert [stderr.index(line) for line in ordered] == sorted(
        stderr.index(line) for line in ordered
    )
    assert "rolled_back" in ordered[1]


def _was_superseded(before: list[dict[str, Any]], decision: dict[str, Any]) -> bool:
    return any(b["decision_id"] == decision["decision_id"] and b["superseded_by"] for b in before)


@pytest.mark.parametrize("where", ["before the command", "after its name"])
def test_apply_shows_its_steps(run: Run, tmp_path: Path, where: str) -> None:
    """`--progress` goes before the command or after its name, as `--format` does; after
    the name it was "No such option"."""
    ran = run("demo", "--dir", str(tmp_path / "demo"), "--format=json")
    top = json.loads(ran.output)["plan_id"]
    command = ("plan", "apply", top[:10], "--as", "alice")
    applied = run(
        *(("--progress", *command) if where == "before the command" else (*command, "--progress"))
    )
    assert applied.exit_code == 0, applied.output
    stderr = applied.stderr.splitlines()
    assert stderr[0].startswith("  · approval ") and stderr[0].endswith(": approved by alice")
    assert stderr[1] == "  · Apply started (attempt 1)"
    assert stderr[-1] == "  · applied: 4 resources"
    assert "  · now apply · applied" in stderr


def test_plan_run_at_each_gate_shows_what_it_recorded_child_plans_included(
    run: Run, tmp_path: Path
) -> None:
    """A supervised plan goes on one gate at a time: each `plan run` lists the decisions it
    recorded, the child plan's (spawned by an earlier run, resumed by this one) named by
    its action; over all the runs, each decision once, and each tool call once (a call
    the guard held runs in the next `plan run`, after its decision's line was shown)."""
    started = run(
        "--progress", "demo", "--dir", str(tmp_path / "demo"), "--automation-profile",
        "supervised", "--format=json",
    )  # fmt: skip
    top = json.loads(started.stdout)["plan_id"]
    before = max(d["sequence_number"] for d in _tree(run, top))
    shown: list[tuple[str, int, str, str, str]] = []
    calls = [line for line in started.stderr.splitlines() if CALL.match(line)]
    for _ in range(12):  # each run answers one gate; the plan has fewer
        pending = json.loads(run("approval", "list", "--format=json").output)["approvals"]
        gates = [a for a in pending if a["kind"] != "apply_gate"]
        if not gates:
            break
        for approval in gates:
            assert run("approval", "approve", approval["approval_id"]).exit_code == 0
        went_on = run("--progress", "plan", "run", top)
        assert went_on.exit_code == 0, went_on.output
        shown += _decision_lines(went_on.stderr, top)
        calls += [line for line in went_on.stderr.splitlines() if CALL.match(line)]
    else:
        pytest.fail("the plan never reached its Apply gate")
    _, child = _plans(run)
    children = [line for line in shown if line[0] == "write-docs"]
    recorded = _tree(run, child)
    assert len(children) == len(recorded) > 0
    for line, decision in zip(children, recorded, strict=True):
        assert _same(line, decision, "write-docs"), (line, decision)
    ours = [line for line in shown if line[0] == top]
    made = [d for d in _tree(run, top) if d["sequence_number"] > before]
    assert len(ours) == len(made) > 0
    for line, decision in zip(ours, made, strict=True):
        assert _same(line, decision, top), (line, decision)
    made_calls = [
        call
        for plan in (top, child)
        for decision in _tree(run, plan)
        for call in json.loads(
            run("plan", "explain", decision["decision_id"], "--format=json").output
        )["tool_invocations"]
    ]
    assert len(calls) == len(made_calls) > 0, calls
