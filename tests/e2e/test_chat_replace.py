"""A chat model makes other calls in place of a call of its that failed.

A failed call that is not a validation — an edit whose old text is not in the file, a
command that failed — is answered by the model (``fix_failure``, asked with the call and
its output): the calls it gives are made in the failed call's place, under an
``error_recovery`` decision, and the decision's next calls go on after them. No calls: the
failed call runs again as it is (a failure that may pass by itself). Through the real
client stack (``ChatOpenAI`` over HTTP to the local server); the oracle is a plan whose
model made the right call at first, run and landed the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_openai")

from cleveragents_tui import failpoints
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CorrectionMode, DecisionType, Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run.lifecycle import apply_plan, resume_plan
from cleveragents_tui.store.store import Store
from tests.support.chat_plans import RESOURCE, chat_options, edit, files, run_chat_plan, write
from tests.support.openai_server import (
    OpenAIServer,
    Reply,
    finish_phase,
    record_decision,
    tool_call,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture

PROMPT = "Greet in greet.py, and test it"
FIRST = 'def greet() -> str:\n    return "Hello"\n'
TEST = (
    "import unittest\n\nfrom greet import greet\n\n\n"
    "class GreetTest(unittest.TestCase):\n"
    "    def test_greets(self) -> None:\n"
    '        self.assertTrue(greet().endswith("world"))\n'
)
MISSED = edit("greet.py", '"Hello!"', '"Hello, world"')  # text greet.py does not have
RIGHT = edit("greet.py", '"Hello"', '"Hello, world"')
TESTS = {
    "tool": "local/run-tests",
    "arguments": {"resource": RESOURCE, "argv": [sys.executable, "-m", "unittest", "-q"]},
}


def _replies(*calls: dict[str, Any]) -> list[Reply]:
    return [
        record_decision(
            key="design",
            decision_type="strategy_choice",
            question="Where does greet live?",
            chosen_option="a greet module with a unit test",
            confidence=0.9,
        ),
        finish_phase(),
        record_decision(
            key="write",
            decision_type="implementation_choice",
            question="Write greet and its test",
            chosen_option="greet.py, then its greeting, then the suite",
            parent_key="design",
            depends_on=["design"],
            confidence=0.9,
            tool_calls=[write("greet.py", FIRST), write("test_greet.py", TEST), *calls],
        ),
    ]


def _instead(*calls: dict[str, Any], said: str = "", rationale: str = "no '!' in it") -> Reply:
    answer = {"rationale": rationale, "tool_calls": list(calls)}
    return tool_call("fix_failure", answer, content=said)


def _run(
    store: Store, server: OpenAIServer, tmp_path: Path, name: str, **kw: Any
) -> tuple[Plan, Path]:
    return run_chat_plan(store, server, tmp_path, name, PROMPT, **kw)


def _recoveries(store: Store, plan: Plan) -> list[Decision]:
    with store.unit_of_work() as uow:
        return [
            d
            for d in uow.decisions.for_plan(plan.plan_id)
            if d.decision_type is DecisionType.ERROR_RECOVERY and d.superseded_by is None
        ]


def _runs(store: Store, plan: Plan) -> list[tuple[str, bool | None, str | None]]:
    """Every call the plan's current decisions made, in order: tool, ok, its old text."""
    with store.unit_of_work() as uow:
        return [
            (i.tool, i.ok, i.arguments.get("old"))
            for d in uow.decisions.for_plan(plan.plan_id)
            if d.superseded_by is None
            for i in uow.tool_invocations.for_decision(d.decision_id)
        ]


def _oracle(tmp_path: Path, server: OpenAIServer, guided: dict[str, Any] = RIGHT) -> Path:
    """A plan whose model made ``guided`` at first, run and landed."""
    store = Store.open(str(tmp_path / "oracle.db"))
    server.add(*_replies(guided, TESTS), finish_phase())
    right, folder = _run(store, server, tmp_path, "right")
    assert right.state is PlanState.APPLIED
    return folder


def test_a_missed_edit_is_made_again_as_the_model_says_and_the_plan_lands_the_right_files(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    said = "The file says Hello without a '!'."
    openai_server.add(*_replies(MISSED, TESTS), _instead(RIGHT, said=said), finish_phase())
    store = Store.open(str(tmp_path / "fixed.db"))

    plan, folder = _run(store, openai_server, tmp_path, "fixed")

    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)
    asked = openai_server.completions[3]  # after the strategy, its finish and the write
    assert asked.tool_names == ["fix_failure"]
    assert "calls to make in its place" in asked.text  # not the validation's rules
    assert "local/edit-file failed in decision 'write'" in asked.text
    assert "the old text was not found in greet.py" in asked.text
    did = asked.text.split("## What decision 'write' did before the failed call")[1]
    assert "local/write-file" in did and "test_greet.py" in did
    [recovery] = _recoveries(store, plan)
    assert recovery.chosen_option == (
        "Replace the failed local/edit-file with local/edit-file (retry 1 of 3)"
    )
    assert (recovery.rationale, recovery.actor_reasoning) == ("no '!' in it", said)
    # the missed edit ran once, then the tests (passing: the model's edit ran before them,
    # under the recovery decision)
    assert _runs(store, plan) == [
        ("local/write-file", True, None),
        ("local/write-file", True, None),
        ("local/edit-file", False, '"Hello!"'),
        ("local/run-tests", True, None),
        ("local/edit-file", True, '"Hello"'),
    ]
    assert files(folder) == files(_oracle(tmp_path, openai_server))


def test_a_replacement_that_failed_is_told_to_the_model_and_its_stop_asks_a_person(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    missed_again = edit("greet.py", "'Hello'", "'Hello, world'")
    give_up = {"rationale": "I cannot tell the greeting", "tool_calls": [], "stop_and_ask": True}
    openai_server.add(
        *_replies(MISSED, TESTS), _instead(missed_again), tool_call("fix_failure", give_up)
    )
    store = Store.open(str(tmp_path / "fixed.db"))

    plan, _ = _run(store, openai_server, tmp_path, "fixed")

    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    first, second = [c for c in openai_server.completions if c.tool_names == ["fix_failure"]]
    assert "Tried before" not in first.text
    tried = second.text.split("## Tried before in its place")[1]
    assert "retry 1: local/edit-file" in tried and '"old":"\'Hello\'"' in tried
    assert "failed: local/edit-file: the old text was not found in greet.py" in tried
    with store.unit_of_work() as uow:
        [asked] = uow.approvals.pending(plan.plan_id)
    assert "local/edit-file failed in step write (2 runs; last: " in asked.question
    assert [d.chosen_option for d in _recoveries(store, plan)] == [
        "Replace the failed local/edit-file with local/edit-file (retry 1 of 3)",
        "Stop and ask a person",
    ]
    assert [(tool, ok) for tool, ok, _ in _runs(store, plan)][2:] == [
        ("local/edit-file", False),  # the missed edit: the tests after it never ran
        ("local/edit-file", False),
    ]


def test_no_calls_from_the_model_run_the_failed_command_again_as_it_is(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """A failure that passes by itself (here a command that fails on its first run, as a
    network call may): the model gives no calls, and the command runs again."""
    mark = tmp_path / "tried-once"  # outside the plan's folder, as a server's state is
    flaky = (
        "import pathlib, sys\n"
        f"mark = pathlib.Path({str(mark)!r})\n"
        "seen = mark.exists()\n"
        "mark.touch()\n"
        "sys.exit(0 if seen else 'the server is busy')\n"
    )
    command = {
        "tool": "local/run-command",
        "arguments": {"resource": RESOURCE, "argv": [sys.executable, "-c", flaky]},
    }
    openai_server.add(
        *_replies(RIGHT, command, TESTS), _instead(rationale="busy: try again"), finish_phase()
    )
    store = Store.open(str(tmp_path / "fixed.db"))
    tools = ("local/write-file", "local/edit-file", "local/run-tests", "local/run-command")

    plan, folder = _run(store, openai_server, tmp_path, "fixed", tools=tools)

    assert plan.state is PlanState.APPLIED
    [asked] = [c for c in openai_server.completions if c.tool_names == ["fix_failure"]]
    assert "local/run-command failed in decision 'write'" in asked.text
    assert "the server is busy" in asked.text
    [recovery] = _recoveries(store, plan)
    assert recovery.chosen_option == "Retry local/run-command (retry 1 of 3)"
    commands = [ok for tool, ok, _ in _runs(store, plan) if tool == "local/run-command"]
    assert commands == [False, True]
    assert files(folder) == files(_oracle(tmp_path, openai_server))


def test_correcting_a_replacement_with_guidance_lands_what_a_plan_guided_at_first_lands(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """The model made one edit in place of its missed one; the user corrects that. The
    replay asks the model again, with the guidance, and makes its new calls in the missed
    edit's place: the plan lands what a plan whose model made that edit at first lands."""
    guided = edit("greet.py", '"Hello"', '"Hi, world"')
    openai_server.add(*_replies(MISSED, TESTS), _instead(RIGHT), finish_phase())
    store = Store.open(str(tmp_path / "fixed.db"))
    plan, folder = _run(store, openai_server, tmp_path, "fixed", profile="auto")
    assert plan.state is PlanState.AWAITING_APPROVAL  # at the Apply gate
    [replaced] = _recoveries(store, plan)

    # the replay asks for the next decision (none), then what to make in the edit's place
    openai_server.add(finish_phase(), _instead(guided))
    impact = preview(store, replaced.decision_id, CorrectionMode.REVERT, "greet with Hi")
    done = execute(
        store,
        impact,
        acknowledged=True,
        requested_by="ana",
        options=chat_options(tmp_path, "fixed", openai_server),
    )

    assert done.plan.state is PlanState.AWAITING_APPROVAL
    asked = openai_server.completions[-1]
    assert asked.tool_names == ["fix_failure"] and "greet with Hi" in asked.text
    assert "calls to make in its place" in asked.text
    [again] = _recoveries(store, plan)
    assert again.decision_id != replaced.decision_id
    apply_plan(store, plan.plan_id, "ana", chat_options(tmp_path, "fixed", openai_server))
    assert 'return "Hi, world"' in (folder / "greet.py").read_text()
    assert files(folder) == files(_oracle(tmp_path, openai_server, guided))


def test_a_failed_edit_that_changed_nothing_is_replaced_without_asking_to_restore(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """Under ``trusted`` (``approve_plan`` manual) a failed call that wrote may have left
    half its work, so a person is asked whether to restore before the retry. An edit whose
    old text was not found changed nothing: the replacement is made without that question,
    and the plan goes on to its Apply gate."""
    openai_server.add(*_replies(MISSED, TESTS), _instead(RIGHT), finish_phase())
    store = Store.open(str(tmp_path / "fixed.db"))

    plan, _ = _run(store, openai_server, tmp_path, "fixed", profile="trusted")

    with store.unit_of_work() as uow:
        [asked] = uow.approvals.pending(plan.plan_id)
        restored = uow.events.payloads(plan.plan_id, "restored_before_retry")
    assert (plan.phase, asked.question) == (Phase.EXECUTE, "Execute complete. Apply the changes?")
    assert restored == []
    assert [ok for tool, ok, _ in _runs(store, plan) if tool == "local/run-tests"] == [True]


def test_a_run_stopped_inside_a_replacement_finishes_it_without_asking_again(
    tmp_path: Path, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the first of the two calls made in the missed edit's place: the next
    run makes the second, not the missed edit nor the first again, and asks the model
    nothing about it; the plan lands what a plan whose model made both at first lands."""
    note = write("NOTES.md", "greets the world\n")
    openai_server.add(*_replies(MISSED, TESTS), _instead(RIGHT, note))
    store = Store.open(str(tmp_path / "fixed.db"))
    monkeypatch.setenv(failpoints.ENV_VAR, "tool.recorded@local/edit-file#2")
    failpoints.reset()
    with pytest.raises(failpoints.InjectedFault):
        _run(store, openai_server, tmp_path, "fixed")
    monkeypatch.delenv(failpoints.ENV_VAR)
    failpoints.reset()
    with store.unit_of_work() as uow:
        [stopped] = uow.plans.all()
    asked = len(openai_server.completions)

    openai_server.add(finish_phase())
    plan = resume_plan(store, stopped.plan_id, chat_options(tmp_path, "fixed", openai_server))

    assert plan.state is PlanState.APPLIED
    assert [c.tool_names for c in openai_server.completions[asked:]] == [
        ["record_decision", "finish_phase"]  # the next decision; no fix asked again
    ]
    assert [(tool, ok) for tool, ok, _ in _runs(store, plan)][2:] == [
        ("local/edit-file", False),
        ("local/run-tests", True),
        ("local/edit-file", True),
        ("local/write-file", True),
    ]
    store_right = Store.open(str(tmp_path / "oracle.db"))
    openai_server.add(*_replies(RIGHT, note, TESTS), finish_phase())
    right, right_folder = _run(store_right, openai_server, tmp_path, "right")
    assert right.state is PlanState.APPLIED
    assert files(tmp_path / "fixed") == files(right_folder)
