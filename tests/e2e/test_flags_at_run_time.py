"""Every automation flag acts in a running plan: its gate fires when the confidence is just
below the threshold, and does not when the confidence is at it (docs/guardrails.md, "Proof
at run time").

Each case runs a real plan three times, each in a fresh store (the confidence depends on
the store's history, so each run starts from the same one): once with the flag's threshold
at 0.9999 to learn the confidence the gate computes, then with the threshold one float
above that confidence (the gate fires: a pending approval naming the flag), then with the
threshold equal to it (no approval for the flag, and the plan goes past the gate). Every
other threshold is the ``ci`` profile's 0.0.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.automation.escalation import Factors
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.approval import Approval
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.run.lifecycle import apply_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.support.flag_profiles import register_profile
from tests.support.folders import add_folder

RESOURCE = "local/files"


@dataclass
class World:
    """A fresh store with one real folder registered as a filesystem_copy resource."""

    store: Store
    folder: Path
    options: RunOptions

    def approvals(self, plan_id: str, flag: str) -> list[Approval]:
        with self.store.unit_of_work() as uow:
            return [a for a in uow.approvals.every(plan_id) if a.details.get("flag") == flag]

    def plans(self) -> list[Plan]:
        with self.store.unit_of_work() as uow:
            return list(uow.plans.all())


def _write(path: str) -> dict[str, Any]:
    return {
        "tool": "local/write-file",
        "arguments": {"resource": RESOURCE, "path": path, "content": "from the plan\n"},
    }


def _strategy(*alternatives: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": "layout",
        "type": "strategy_choice",
        "question": "Which layout?",
        "alternatives": list(alternatives) or [{"option": "layout alpha"}],
    }


def _execute(key: str, option: str, *calls: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "key": key,
        "type": "implementation_choice",
        "parent": "layout",
        "question": "Write it?",
        "alternatives": [{"option": option, "tool_calls": list(calls)}],
        **more,
    }


def _action(*decisions: dict[str, Any], **more: Any) -> Action:
    return Action.model_validate(
        {
            "name": "local/flags",
            "prompt": "write a file",
            "resources": [RESOURCE],
            "decisions": list(decisions),
            **more,
        }
    )


SIMPLE = _action(_strategy(), _execute("write", "a.txt", _write("a.txt")))


def _current(world: World, plan: Plan) -> dict[str, str]:
    with world.store.unit_of_work() as uow:
        return {
            d.step_key or "": d.chosen_option
            for d in uow.decisions.for_plan(plan.plan_id, include_superseded=False)
        }


def _corrections_by(world: World, plan: Plan) -> list[str]:
    with world.store.unit_of_work() as uow:
        return [str(c.requested_by) for c in uow.corrections.for_plan(plan.plan_id)]


# -- the scenarios: run a plan under `profile`; say whether it went past the flag's gate ----


def _simple(world: World, profile: str) -> Plan:
    return start_plan(world.store, SIMPLE, profile_override=profile, options=world.options)


def _revise(world: World, profile: str) -> Plan:
    action = _action(
        _strategy(
            {"option": "a single file", "match": ["single"]},
            {"option": "a split layout", "match": ["split", "layout"]},
        ),
        _execute(
            "write-single",
            "give up on one file",
            when={"layout": "a single file"},
        )
        | {
            "alternatives": [
                {
                    "option": "give up on one file",
                    "rationale": "one file cannot hold it; use the split layout",
                    "revise_strategy": "layout",
                }
            ]
        },
        _execute("write-split", "two files", _write("b.txt"), when={"layout": "a split layout"}),
    )
    return start_plan(world.store, action, profile_override=profile, options=world.options)


def _spawn(world: World, profile: str) -> Plan:
    child = {
        "name": "local/child",
        "prompt": "write the child's file",
        "resources": [RESOURCE],
        "decisions": [
            _strategy(),
            _execute("write", "c.txt", _write("c.txt")),
        ],
    }
    action = _action(
        _strategy(),
        {
            "key": "split",
            "type": "subplan_spawn",
            "parent": "layout",
            "question": "Split the work?",
            "alternatives": [{"option": "one child plan", "spawn": ["local/child"]}],
        },
        subactions=[child],
    )
    return start_plan(world.store, action, profile_override=profile, options=world.options)


def _constrained(world: World, profile: str) -> Plan:
    """Apply refused: a.txt changed in the real folder after the sandbox was made."""
    action = _action(
        _strategy({"option": "layout alpha", "match": ["alpha"]}, {"option": "layout beta"}),
        _execute("write", "a.txt", _write("a.txt")),
    )
    plan = start_plan(world.store, action, profile_override=profile, options=world.options)
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL), plan
    (world.folder / "a.txt").write_text("a person's own a.txt\n")
    return apply_plan(world.store, plan.plan_id, "alice", world.options)


def _half_done(world: World, profile: str) -> Plan:
    """A command that writes out.txt, then fails the first time it runs (a marker outside
    the sandbox says it ran before)."""
    marker = world.folder.parent / "ran-once"
    script = f"echo x >> out.txt; test -f {marker} || {{ touch {marker}; exit 1; }}"
    call = {
        "tool": "local/run-command",
        "arguments": {"resource": RESOURCE, "argv": ["sh", "-c", script]},
    }
    action = _action(_strategy(), _execute("write", "out.txt", call))
    return start_plan(world.store, action, profile_override=profile, options=world.options)


def _fails_once(world: World, profile: str) -> Plan:
    """The validation local/run-tests fails the first time it runs."""
    marker = world.folder.parent / "tested-once"
    call = {
        "tool": "local/run-tests",
        "arguments": {
            "resource": RESOURCE,
            "argv": ["sh", "-c", f"test -f {marker} || {{ touch {marker}; exit 1; }}"],
        },
    }
    action = _action(_strategy(), _execute("test", "run the tests", call))
    return start_plan(world.store, action, profile_override=profile, options=world.options)


def _retried(world: World, plan: Plan) -> bool:
    return any(key.startswith("recover:") and ":retry-" in key for key in _current(world, plan))


def _restored(world: World, plan: Plan) -> bool:
    with world.store.unit_of_work() as uow:
        return bool(uow.events.payloads(plan.plan_id, "restored_before_retry"))


@dataclass(frozen=True)
class Case:
    run: Callable[[World, str], Plan]
    passed: Callable[[World, Plan], bool]
    thresholds: dict[str, float]  # the other thresholds the scenario needs


CASES: dict[str, Case] = {
    "decompose_task": Case(_simple, lambda w, p: "prompt" in _current(w, p), {}),
    "create_tool": Case(_simple, lambda w, p: p.phase is not Phase.STRATEGIZE, {}),
    "select_tool": Case(_simple, lambda w, p: p.state is PlanState.APPLIED, {}),
    "edit_code": Case(_simple, lambda w, p: "layout" in _current(w, p), {}),
    "execute_command": Case(_simple, lambda w, p: "write" in _current(w, p), {}),
    "delete_content": Case(_revise, lambda w, p: _corrections_by(w, p) == ["execution actor"], {}),
    "access_network": Case(
        _constrained,
        lambda w, p: _corrections_by(w, p) == ["system (constrained Apply)"],
        {"select_tool": 1.0},
    ),
    "approve_plan": Case(_half_done, _restored, {}),
    "create_file": Case(_fails_once, _retried, {}),
    "modify_config": Case(_half_done, _retried, {}),
    "install_dependency": Case(
        _spawn, lambda w, p: any(c.parent_plan_id == p.plan_id for c in w.plans()), {}
    ),
}


@pytest.fixture
def worlds(tmp_path: Path) -> Iterator[Callable[[], World]]:
    opened: list[Store] = []

    def make() -> World:
        home = tmp_path / f"world{len(opened)}"
        folder = home / "files"
        folder.mkdir(parents=True)
        store = Store.open(str(home / "agents.db"))
        opened.append(store)
        add_folder(store, RESOURCE, folder)
        return World(store, folder, RunOptions(sandbox_base=home / "sandboxes"))

    yield make
    for store in opened:
        store.close()


def _run(world: World, case: Case, flag: str, threshold: float) -> Plan:
    register_profile(
        world.store, "flags", base="ci", thresholds={**case.thresholds, flag: threshold}
    )
    return case.run(world, "local/flags")


@pytest.mark.parametrize("flag", sorted(CASES))
def test_flag_gates_below_its_threshold(flag: str, worlds: Callable[[], World]) -> None:
    case = CASES[flag]
    probe = worlds()
    plan = _run(probe, case, flag, 0.9999)
    [asked] = probe.approvals(plan.plan_id, flag)
    confidence = Factors(**asked.details["factors"]).confidence
    assert 0.0 < confidence < 0.9999

    below = worlds()
    plan = _run(below, case, flag, math.nextafter(confidence, 1.0))
    [asked] = below.approvals(plan.plan_id, flag)
    assert asked.pending and asked.details["confidence"] == round(confidence, 4)
    assert not case.passed(below, plan), f"{flag}: went past its gate below the threshold"

    at = worlds()
    plan = _run(at, case, flag, confidence)
    assert at.approvals(plan.plan_id, flag) == []
    assert case.passed(at, plan), f"{flag}: did not go past its gate at the threshold"


@pytest.mark.parametrize("answer", ["approve", "deny"])
def test_the_decompose_task_gate_once_answered(answer: str, worlds: Callable[[], World]) -> None:
    """Approved, Strategize starts with the plan's prompt recorded (it used to crash with
    KeyError 'prompt' when the first decision then went on alone); denied and resumed, the
    gate is asked again rather than skipped."""
    from cleveragents_tui.engine.run.approvals import answer_approval
    from cleveragents_tui.engine.run.lifecycle import resume_plan

    world = worlds()
    register_profile(world.store, "ask-first", base="ci", thresholds={"decompose_task": 1.0})
    plan = _simple(world, "local/ask-first")
    [gate] = world.approvals(plan.plan_id, "decompose_task")
    answer_approval(world.store, gate.approval_id, approve=answer == "approve", by="alice")
    resumed = resume_plan(world.store, plan.plan_id, world.options)
    if answer == "approve":
        assert resumed.state is PlanState.APPLIED
        assert "prompt" in _current(world, resumed)
    else:
        assert resumed.state is PlanState.AWAITING_APPROVAL
        assert _current(world, resumed) == {}
        assert [a.pending for a in world.approvals(plan.plan_id, "decompose_task")] == [False, True]


@pytest.mark.parametrize(
    ("approve_plan", "answer", "landed"),
    [(0.0, None, "x\n"), (1.0, "approve", "x\n"), (1.0, "deny", "x\nx\n")],
)
def test_a_failed_call_is_retried_from_its_checkpoint_when_restoring_is_allowed(
    approve_plan: float, answer: str | None, landed: str, worlds: Callable[[], World]
) -> None:
    """The half-done write of the failed first run is rolled back before the retry (one
    line lands), unless a person denies restoring (both lines land)."""
    from cleveragents_tui.engine.run.approvals import answer_approval
    from cleveragents_tui.engine.run.lifecycle import resume_plan

    world = worlds()
    register_profile(world.store, "restore", base="ci", thresholds={"approve_plan": approve_plan})
    plan = _half_done(world, "local/restore")
    if answer is not None:
        [asked] = [a for a in world.approvals(plan.plan_id, "approve_plan") if a.pending]
        assert "restore it from the checkpoint" in asked.question
        answer_approval(world.store, asked.approval_id, approve=answer == "approve", by="alice")
        plan = resume_plan(world.store, plan.plan_id, world.options)
    assert plan.state is PlanState.APPLIED
    assert (world.folder / "out.txt").read_text() == landed
