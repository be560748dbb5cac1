"""A chat model's call that is refused is sent back with why, and the model mends it.

A model names a tool its action does not give it, or a decision type of another phase: the
call is refused field by field (nothing is recorded, nothing runs) and the model is told
why in a tool message answering that call, then asked again — at most ``ASKED_AGAIN``
times in a turn. Before, the plan stopped errored on the first slip. Through the real
client stack (``ChatOpenAI`` over HTTP to the local server); the oracle is a plan whose
model made the right call at first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_openai")

from cleveragents_tui.actors.reasoners.chat import ASKED_AGAIN
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.run.errors import ReasonerFailedError
from cleveragents_tui.store.store import Store
from tests.support.chat_plans import RESOURCE, files, run_chat_plan, write
from tests.support.openai_server import (
    OpenAIServer,
    Reply,
    finish_phase,
    record_decision,
    tool_call,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture

PROMPT = "Write a README"
STRATEGY = record_decision(
    key="layout",
    decision_type="strategy_choice",
    question="How is the documentation laid out?",
    chosen_option="one README",
    confidence=0.9,
)
SHELL = {  # a tool the model is not given (no such tool): it must never run
    "tool": "local/shell",
    "arguments": {"resource": RESOURCE, "argv": ["sh", "-c", "echo ran > ran.txt"]},
}


def _write(*calls: dict[str, Any], decision_type: str = "implementation_choice") -> Reply:
    return record_decision(
        key="write",
        decision_type=decision_type,
        question="What does the README say?",
        chosen_option="a one-line README",
        parent_key="layout",
        depends_on=["layout"],
        confidence=0.8,
        tool_calls=list(calls),
    )


RIGHT = _write(write("README.md", "# readme\n"))


def _run(store: Store, server: OpenAIServer, tmp_path: Path, name: str) -> tuple[Plan, Path]:
    return run_chat_plan(store, server, tmp_path, name, PROMPT)


def _oracle(tmp_path: Path, server: OpenAIServer) -> dict[str, bytes]:
    server.add(STRATEGY, finish_phase(), RIGHT, finish_phase())
    plan, folder = _run(Store.open(str(tmp_path / "oracle.db")), server, tmp_path, "right")
    assert plan.state is PlanState.APPLIED
    return files(folder)


def test_a_tool_the_action_does_not_give_is_refused_told_and_mended(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.add(STRATEGY, finish_phase(), _write(SHELL), RIGHT, finish_phase())
    store = Store.open(str(tmp_path / "mended.db"))

    plan, folder = _run(store, openai_server, tmp_path, "mended")

    assert (plan.phase, plan.state) == (Phase.APPLY, PlanState.APPLIED)
    refused, asked = openai_server.completions[2:4]
    told = asked.messages[len(refused.messages) :]
    assert [m["role"] for m in told] == ["assistant", "tool"]
    [call] = told[0]["tool_calls"]
    assert told[1]["tool_call_id"] == call["id"]
    assert "Refused, nothing was recorded" in told[1]["content"]
    assert "'local/shell' is not a tool available" in told[1]["content"]
    with store.unit_of_work() as uow:
        decisions = uow.decisions.for_plan(plan.plan_id)
        calls = [
            c.tool for d in decisions for c in uow.tool_invocations.for_decision(d.decision_id)
        ]
    assert calls == ["local/write-file"]  # the refused call never ran
    with store.unit_of_work() as uow:
        usage = uow.events.payloads(plan.plan_id, "model_usage")
    refusals = [u["refused"] for u in usage if "refused" in u]  # the progress lines say it
    [why] = refusals
    assert str(why).startswith(
        "record_decision.tool_calls[0].tool 'local/shell' is not a tool available in the "
        "execute phase (available: "
    )
    assert [d.chosen_option for d in decisions if d.phase is Phase.EXECUTE] == ["a one-line README"]
    assert files(folder) == _oracle(tmp_path, openai_server)
    assert openai_server.pending == 0


def test_a_type_of_another_phase_is_mended_when_told(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    wrong = _write(write("README.md", "# readme\n"), decision_type="strategy_choice")
    openai_server.add(STRATEGY, finish_phase(), wrong, RIGHT, finish_phase())

    plan, folder = _run(Store.open(str(tmp_path / "typed.db")), openai_server, tmp_path, "typed")

    assert plan.state is PlanState.APPLIED
    said = openai_server.completions[3].messages[-1]["content"]
    assert "strategy_choice is not allowed in the execute phase" in said
    assert files(folder) == _oracle(tmp_path, openai_server)


def test_a_model_that_keeps_slipping_stops_the_plan_with_the_reason(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.add(STRATEGY, finish_phase(), *[_write(SHELL)] * (ASKED_AGAIN + 1))
    store = Store.open(str(tmp_path / "slips.db"))

    with pytest.raises(ReasonerFailedError, match="'local/shell' is not a tool available"):
        _run(store, openai_server, tmp_path, "slips")

    assert len(openai_server.completions) == 2 + ASKED_AGAIN + 1
    assert openai_server.pending == 0
    assert not (tmp_path / "slips" / "ran.txt").exists()


def test_arguments_that_are_not_json_are_sent_back_and_mended(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """A local model's broken JSON: the client sends the call back as it was, answered with
    why, and the model's next call is read."""
    broken = tool_call("record_decision", '{"key": "write", decision_type: oops')
    openai_server.add(STRATEGY, finish_phase(), broken, RIGHT, finish_phase())

    plan, folder = _run(Store.open(str(tmp_path / "json.db")), openai_server, tmp_path, "json")

    assert plan.state is PlanState.APPLIED
    sent_back = openai_server.completions[3].messages[-2:]
    assert sent_back[0]["tool_calls"][0]["function"]["arguments"].endswith("decision_type: oops")
    assert sent_back[1]["role"] == "tool"
    assert "the arguments of record_decision are not valid JSON" in sent_back[1]["content"]
    assert files(folder) == _oracle(tmp_path, openai_server)


def test_a_call_on_a_resource_the_plan_does_not_have_is_refused_and_mended(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    """The model guesses the resource's name ("calc" for local/calc): refused, told the
    plan's resources, mended. Before, the decision could not be recorded (the name is not
    namespace/name) and the command ended on a traceback."""
    guessed = write("README.md", "# readme\n")
    guessed["arguments"]["resource"] = "calc"
    openai_server.add(STRATEGY, finish_phase(), _write(guessed), RIGHT, finish_phase())

    plan, folder = _run(Store.open(str(tmp_path / "res.db")), openai_server, tmp_path, "res")

    assert plan.state is PlanState.APPLIED
    said = openai_server.completions[3].messages[-1]["content"]
    assert f"'calc' is not a resource of this plan (its resources: {RESOURCE})" in said
    assert f"- {RESOURCE}" in openai_server.completions[0].text  # the prompt lists it
    assert files(folder) == _oracle(tmp_path, openai_server)
