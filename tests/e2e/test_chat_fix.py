"""A chat model fixes the work its failed tests ran on, and the tests run again.

Through the real client stack: ``ChatOpenAI`` over HTTP to the scripted OpenAI-compatible
server of tests/support. The model writes a module with a bug and its test; the test run
fails; the model is asked, with the test's output, for a fix (``fix_failure``), its edit is
made under the retry decision, and the tests pass. The oracle is a plan whose model wrote
the right module at first: both land the same files.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_openai")

from cleveragents_tui.domain.enums import CorrectionMode, DecisionType, Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run.lifecycle import apply_plan
from cleveragents_tui.store.store import Store
from tests.support.chat_plans import RESOURCE, chat_options, files, run_chat_plan, write
from tests.support.openai_server import (
    OpenAIServer,
    Reply,
    finish_phase,
    record_decision,
    tool_call,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture

BUGGY = "def add(a: int, b: int) -> int:\n    return a - b\n"
RIGHT = "def add(a: int, b: int) -> int:\n    return a + b\n"
TEST = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class AddTest(unittest.TestCase):\n"
    "    def test_adds(self) -> None:\n"
    "        self.assertEqual(add(2, 3), 5)\n"
)
RATIONALE = "add subtracted: it now adds"


def _replies(module: str) -> list[Reply]:
    return [
        record_decision(
            key="design",
            decision_type="strategy_choice",
            question="Where does add live?",
            chosen_option="a calc module with a unit test",
            confidence=0.9,
        ),
        finish_phase(),
        record_decision(
            key="write",
            decision_type="implementation_choice",
            question="Write add and its test",
            chosen_option="calc.py and test_calc.py, then the suite",
            parent_key="design",
            depends_on=["design"],
            confidence=0.9,
            tool_calls=[
                write("calc.py", module),
                write("test_calc.py", TEST),
                {
                    "tool": "local/run-tests",
                    "arguments": {
                        "resource": RESOURCE,
                        "argv": [sys.executable, "-m", "unittest", "-q"],
                    },
                },
            ],
        ),
    ]


def _run(
    store: Store, server: OpenAIServer, tmp_path: Path, name: str, profile: str = "ci"
) -> tuple[Plan, Path]:
    prompt = "Add an add function to calc.py, with a test"
    return run_chat_plan(store, server, tmp_path, name, prompt, profile)


def test_the_model_fixes_what_its_failed_tests_ran_on_and_the_plan_lands_the_rightfiles(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    fix = {
        "rationale": RATIONALE,
        "tool_calls": [
            {
                "tool": "local/edit-file",
                "arguments": {
                    "resource": RESOURCE,
                    "path": "calc.py",
                    "old": "a - b",
                    "new": "a + b",
                },
            }
        ],
    }
    said = "The test adds 2 and 3 and gets -1: add subtracts."
    openai_server.add(*_replies(BUGGY), tool_call("fix_failure", fix, content=said), finish_phase())
    store = Store.open(str(tmp_path / "fixed.db"))

    plan, folder = _run(store, openai_server, tmp_path, "fixed")

    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)
    asked = openai_server.completions[3]  # after the strategy, its finish and the write
    assert asked.tool_names == ["fix_failure"]
    assert "local/run-tests failed after decision 'write'" in asked.text
    assert "AssertionError: -1 != 5" in asked.text  # the test's own output, to fix from
    did = asked.text.split("## What decision 'write' did")[1]  # what it wrote, to fix
    assert "local/write-file" in did and "return a - b" in did and "test_calc.py" in did
    with store.unit_of_work() as uow:
        [recovery] = [
            d
            for d in uow.decisions.for_plan(plan.plan_id)
            if d.decision_type is DecisionType.VALIDATION_RESPONSE
        ]
        runs = [(i.tool, i.ok) for i in uow.tool_invocations.for_decision(recovery.decision_id)]
        usage = uow.events.payloads(plan.plan_id, "model_usage")
    assert recovery.chosen_option == (
        "Fix with local/edit-file, then retry local/run-tests (retry 1 of 3)"
    )
    assert (recovery.rationale, recovery.actor_reasoning) == (RATIONALE, said)
    assert runs == [("local/edit-file", True), ("local/run-tests", True)]
    assert len(usage) == 5  # the fix's model call is counted with the decisions'

    oracle = Store.open(str(tmp_path / "oracle.db"))
    openai_server.add(*_replies(RIGHT), finish_phase())
    right, right_folder = _run(oracle, openai_server, tmp_path, "right")
    assert right.state is PlanState.APPLIED
    assert files(folder) == files(right_folder)


def test_a_fix_that_did_not_work_is_told_to_the_model_when_it_is_asked_again(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    def edit(old: str, new: str) -> dict[str, Any]:
        arguments = {"resource": RESOURCE, "path": "calc.py", "old": old, "new": new}
        return {
            "rationale": "fix add",
            "tool_calls": [{"tool": "local/edit-file", "arguments": arguments}],
        }

    openai_server.add(
        *_replies(BUGGY),
        tool_call("fix_failure", edit("a-b", "a+b")),  # a text calc.py does not have
        tool_call("fix_failure", edit("a - b", "a + b")),
        finish_phase(),
    )
    store = Store.open(str(tmp_path / "fixed.db"))

    plan, folder = _run(store, openai_server, tmp_path, "fixed")

    assert plan.state is PlanState.APPLIED
    first, second = [c for c in openai_server.completions if c.tool_names == ["fix_failure"]]
    assert "Fixes tried before" not in first.text
    tried = second.text.split("## Fixes tried before")[1]
    assert "retry 1: local/edit-file" in tried and '"old":"a-b"' in tried
    assert "failed: local/edit-file: the old text was not found in calc.py" in tried
    assert (folder / "calc.py").read_text() == RIGHT


def test_correcting_a_fix_with_guidance_makes_the_guided_fix_and_lands_it(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """The model fixed the module one way; the user corrects that fix. The replay asks the
    model for a fix again, with the guidance, and the plan lands what a plan whose model
    made the guided fix at first lands."""
    guided = "def add(a: int, b: int) -> int:\n    return sum((a, b))\n"

    def rewrite(content: str) -> Reply:
        call = write("calc.py", content)
        return tool_call("fix_failure", {"rationale": "fix add", "tool_calls": [call]})

    openai_server.add(*_replies(BUGGY), rewrite(RIGHT), finish_phase())
    store = Store.open(str(tmp_path / "fixed.db"))
    plan, folder = _run(store, openai_server, tmp_path, "fixed", profile="auto")
    assert plan.state is PlanState.AWAITING_APPROVAL  # at the Apply gate
    with store.unit_of_work() as uow:
        [fix] = [
            d
            for d in uow.decisions.for_plan(plan.plan_id)
            if d.decision_type is DecisionType.VALIDATION_RESPONSE
        ]

    # the replay asks for the next decision (none), then for the fix, with the guidance
    openai_server.add(finish_phase(), rewrite(guided))
    impact = preview(store, fix.decision_id, CorrectionMode.REVERT, "add them with sum()")
    done = execute(
        store,
        impact,
        acknowledged=True,
        requested_by="ana",
        options=chat_options(tmp_path, "fixed", openai_server),
    )

    assert done.plan.state is PlanState.AWAITING_APPROVAL
    asked = openai_server.completions[-1]
    assert asked.tool_names == ["fix_failure"] and "add them with sum()" in asked.text
    apply_plan(store, plan.plan_id, "ana", chat_options(tmp_path, "fixed", openai_server))
    oracle = Store.open(str(tmp_path / "oracle.db"))
    openai_server.add(*_replies(BUGGY), rewrite(guided), finish_phase())
    right, right_folder = _run(oracle, openai_server, tmp_path, "right")
    assert right.state is PlanState.APPLIED
    assert (folder / "calc.py").read_text() == guided
    assert files(folder) == files(right_folder)


def test_a_model_that_cannot_fix_it_stops_for_a_person_without_retrying(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    give_up = {"rationale": "the test needs a network", "tool_calls": [], "stop_and_ask": True}
    openai_server.add(*_replies(BUGGY), tool_call("fix_failure", give_up))
    store = Store.open(str(tmp_path / "fixed.db"))

    plan, _ = _run(store, openai_server, tmp_path, "fixed")

    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    with store.unit_of_work() as uow:
        [asked] = uow.approvals.pending(plan.plan_id)
        [stop] = [
            d
            for d in uow.decisions.for_plan(plan.plan_id)
            if d.decision_type is DecisionType.VALIDATION_RESPONSE
        ]
        tests = [
            i.ok
            for d in uow.decisions.for_plan(plan.plan_id)
            for i in uow.tool_invocations.for_decision(d.decision_id)
            if i.tool == "local/run-tests"
        ]
    assert "local/run-tests failed" in asked.question
    assert (stop.chosen_option, stop.rationale) == (
        "Stop and ask a person",
        "the execution actor makes no fix: the test needs a network",
    )
    assert tests == [False]  # not run again: the retries were not spent on it
