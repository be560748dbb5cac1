"""A plan run by the chat reasoner (a LangChain chat model; here the fake one) end to end."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage

from cleveragents_tui.actors.reasoners.chat import FINISH_PHASE, RECORD_DECISION, ChatReasoner
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.actors.reasoners.test_chat import RecordingFakeChatModel


def call(name: str, **args: object) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"c-{name}"}])


def test_a_chat_model_drives_strategize_and_execute(sqlite_store: Store, tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    resource = Resource(
        resource_id="local/files",
        kind="filesystem",
        location=str(tmp_path / "files"),
        sandbox_strategy="filesystem_copy",
    )
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(resource)
        uow.commit()
    model = RecordingFakeChatModel(
        messages=iter(
            [
                call(
                    RECORD_DECISION,
                    key="layout",
                    decision_type="strategy_choice",
                    question="Which layout?",
                    chosen_option="one README",
                    alternatives=["a docs folder"],
                    confidence=0.8,
                    rationale="small project",
                ),
                call(FINISH_PHASE),
                call(
                    RECORD_DECISION,
                    key="write",
                    decision_type="implementation_choice",
                    question="Write it",
                    chosen_option="write README.md",
                    parent_key="layout",
                    depends_on=["layout"],
                    confidence=0.9,
                    tool_calls=[
                        {
                            "tool": "local/write-file",
                            "arguments": {
                                "resource": "local/files",
                                "path": "README.md",
                                "content": "# hi\n",
                            },
                        }
                    ],
                ),
                call(FINISH_PHASE),
            ]
        )
    )
    registry = default_registry()
    action = Action(
        name="local/readme",
        prompt="Write a README",
        resources=("local/files",),
        tools=("local/write-file",),
    )

    def chat(action: Action, chosen):  # type: ignore[no-untyped-def]
        return ChatReasoner(model, action, registry.specs(), current_steps=chosen)

    plan = start_plan(
        sqlite_store,
        action,
        profile_override="auto",
        options=RunOptions(
            registry=registry, sandbox_base=tmp_path / "sandboxes", reasoner_factory=chat
        ),
    )
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    with sqlite_store.unit_of_work() as uow:
        decisions = {d.step_key: d for d in uow.decisions.for_plan(plan.plan_id)}
        [write_call] = uow.tool_invocations.for_decision(decisions["write"].decision_id)
    assert decisions["layout"].chosen_option == "one README"
    assert decisions["write"].parent_decision_id == decisions["layout"].decision_id
    assert write_call.tool == "local/write-file" and write_call.ok
    assert len(model.received) == 4  # two decisions and two phase ends, nothing re-asked
