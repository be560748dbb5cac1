"""Tokens and cost are real figures, and the token and cost limits act on them.

A chat plan runs through the real client stack — ``ChatOpenAI`` over HTTP to the scripted
OpenAI-compatible server (tests/support/openai_server.py) — so the usage each reply reports
reaches the chat reasoner as LangChain's ``usage_metadata``. Each model call is recorded as
a ``model_usage`` event, priced from the price table (``prices.openai:gpt-4o-mini.*``).
Before, a chat plan's tokens and cost were nowhere, and every token or cost limit let it apply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_openai")

from langchain_openai import ChatOpenAI

from cleveragents_tui.actors.reasoners.chat import ChatReasoner
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.cli.render import usage_line
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.approval import ApprovalKind
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.limits import PlanLimits
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.profile import AutomationProfile
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.engine.run.approvals import answer_approval
from cleveragents_tui.engine.run.lifecycle import resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.config import set_setting, unset_setting
from cleveragents_tui.store.store import Store
from tests.support.openai_server import (
    API_KEY,
    OpenAIServer,
    Reply,
    Usage,
    finish_phase,
    record_decision,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture

CALL = Usage(prompt_tokens=1000, completion_tokens=200)  # 1,200 tokens a call
INPUT, OUTPUT = 0.15, 0.60  # $ per million tokens
CALL_COST = (1000 * INPUT + 200 * OUTPUT) / 1_000_000  # $0.00027
CALLS = 4  # a decision and finish_phase in each phase


def replies() -> list[Reply]:
    return [
        record_decision(
            key="layout",
            decision_type="strategy_choice",
            question="Which layout?",
            chosen_option="one README",
            confidence=0.9,
            usage=CALL,
        ),
        finish_phase(usage=CALL),
        record_decision(
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
                        "content": "hi\n",
                    },
                }
            ],
            usage=CALL,
        ),
        finish_phase(usage=CALL),
    ]


@pytest.fixture
def files(sqlite_store: Store, tmp_path: Path) -> Path:
    return add_files(sqlite_store, tmp_path)


def add_files(store: Store, tmp_path: Path) -> Path:
    """The plans' folder, registered, and the model's prices set."""
    folder = tmp_path / "files"
    folder.mkdir()
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id="local/files",
                kind="filesystem",
                location=str(folder),
                sandbox_strategy="filesystem_copy",
            )
        )
        uow.commit()
    set_setting(store, "prices.openai:gpt-4o-mini.input_per_mtok", str(INPUT))
    set_setting(store, "prices.openai:gpt-4o-mini.output_per_mtok", str(OUTPUT))
    return folder


def run(
    store: Store,
    server: OpenAIServer,
    tmp_path: Path,
    *,
    profile: str = "ci",
    name: str = "local/readme",
    **limits: Any,
) -> Plan:
    server.add(*replies())
    registry = default_registry()
    model = ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key=API_KEY, max_retries=0
    )
    action = Action(
        name=name,
        prompt="Write a README",
        resources=("local/files",),
        tools=("local/write-file",),
        limits=PlanLimits.model_validate(limits),
    )

    def chat(action: Action, chosen: Any) -> ChatReasoner:
        return ChatReasoner(model, action, registry.specs(), current_steps=chosen)

    options = RunOptions(
        registry=registry, sandbox_base=tmp_path / "sandboxes", reasoner_factory=chat
    )
    return start_plan(store, action, profile_override=profile, options=options)


def options_of(tmp_path: Path) -> RunOptions:
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


def usage_events(store: Store, plan: Plan) -> list[dict[str, object]]:
    with store.unit_of_work() as uow:
        return uow.events.payloads(plan.plan_id, "model_usage")


def limit_events(store: Store, plan: Plan) -> list[dict[str, object]]:
    with store.unit_of_work() as uow:
        return uow.events.payloads(plan.plan_id, "limit_exceeded")


def register(store: Store, name: str, **safety: Any) -> str:
    data = ProfileRegistry.builtins()["ci"].model_dump(mode="python")
    data.update(name=f"local/{name}")
    data["safety"] = {**data["safety"], **safety}
    ProfileRegistry(store).add(AutomationProfile.model_validate(data))
    return f"local/{name}"


def test_each_model_call_records_its_tokens_and_cost(
    sqlite_store: Store, files: Path, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    plan = run(sqlite_store, openai_server, tmp_path)
    assert plan.state is PlanState.APPLIED
    assert (files / "README.md").read_text(encoding="utf-8") == "hi\n"
    calls = usage_events(sqlite_store, plan)
    assert [(c["model"], c["phase"]) for c in calls] == [
        ("openai:gpt-4o-mini", "strategize"),
        ("openai:gpt-4o-mini", "strategize"),
        ("openai:gpt-4o-mini", "execute"),
        ("openai:gpt-4o-mini", "execute"),
    ]
    for call in calls:
        assert (call["input_tokens"], call["output_tokens"], call["tokens"]) == (1000, 200, 1200)
        assert call["cost_usd"] == pytest.approx(CALL_COST)
        assert call["priced"] is True
    shown = show_plan(sqlite_store, plan.plan_id)  # `agents plan show`
    assert (shown.usage.model_calls, shown.usage.tokens, shown.usage.tool_calls) == (4, 4800, 1)
    assert shown.usage.cost_usd == pytest.approx(CALLS * CALL_COST)
    assert usage_line(shown.usage) == "4,800 tokens in 4 model calls · $0.001080 · 1 tool call"


@pytest.mark.parametrize(
    ("max_tokens", "applied"),
    [(CALLS * 1200 - 1, False), (CALLS * 1200, True)],
    ids=["below", "at"],
)
def test_max_tokens_pauses_the_plan_past_it(
    sqlite_store: Store,
    files: Path,
    openai_server: OpenAIServer,
    tmp_path: Path,
    max_tokens: int,
    applied: bool,
) -> None:
    plan = run(sqlite_store, openai_server, tmp_path, max_tokens=max_tokens)
    if applied:
        assert plan.state is PlanState.APPLIED
        return
    # the last call (finish_phase) went past it: stopped at the Apply gate, not applied
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    assert not (files / "README.md").exists()
    with sqlite_store.unit_of_work() as uow:
        [approval] = uow.approvals.pending(plan.plan_id)
    assert approval.kind is ApprovalKind.BUDGET_PAUSE
    assert limit_events(sqlite_store, plan) == [
        {"limit": "limits.max_tokens", "allowed": max_tokens, "used": 4800, "action": "pause"}
    ]
    answer_approval(sqlite_store, approval.approval_id, approve=True, by="alice")
    assert resume_plan(sqlite_store, plan.plan_id, options_of(tmp_path)).state is PlanState.APPLIED


def test_max_cost_usd_terminates_the_plan_past_it(
    sqlite_store: Store, files: Path, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    """Two calls cost $0.00054: past $0.0005 before the first Execute decision."""
    plan = run(sqlite_store, openai_server, tmp_path, max_cost_usd=0.0005, on_exceed="terminate")
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.ERRORED)
    [event] = limit_events(sqlite_store, plan)
    assert event["limit"] == "limits.max_cost_usd"
    assert event["used"] == pytest.approx(2 * CALL_COST)
    assert len(openai_server.completions) == 2
    assert not (files / "README.md").exists()


def test_actor_max_tokens_per_call(
    sqlite_store: Store, files: Path, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    plan = run(sqlite_store, openai_server, tmp_path, actor={"max_tokens_per_call": 1199})
    assert (plan.phase, plan.state) == (Phase.STRATEGIZE, PlanState.AWAITING_APPROVAL)
    [event] = limit_events(sqlite_store, plan)
    assert (event["limit"], event["used"]) == ("limits.actor.max_tokens_per_call", 1200)


@pytest.mark.parametrize(
    ("cap", "applied"), [(CALLS * CALL_COST * 0.99, False), (CALLS * CALL_COST * 1.01, True)]
)
def test_safety_max_cost_per_plan(
    sqlite_store: Store,
    files: Path,
    openai_server: OpenAIServer,
    tmp_path: Path,
    cap: float,
    applied: bool,
) -> None:
    profile = register(sqlite_store, "capped", max_cost_per_plan=cap)
    plan = run(sqlite_store, openai_server, tmp_path, profile=profile)
    if applied:
        assert plan.state is PlanState.APPLIED
        return
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    [event] = limit_events(sqlite_store, plan)
    assert event["limit"] == "safety.max_cost_per_plan"
    assert not (files / "README.md").exists()


def test_safety_max_total_cost_counts_every_plan(
    store: Store, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    """A cap one plan stays under ($0.00108 of $0.0015) stops the second plan, on SQLite and
    PostgreSQL (the database sums every plan's calls' costs: store/usage_queries.py)."""
    add_files(store, tmp_path)
    profile = register(store, "total", max_total_cost=0.0015)
    first = run(store, openai_server, tmp_path, profile=profile)
    assert first.state is PlanState.APPLIED
    second = run(store, openai_server, tmp_path, profile=profile, name="local/readme-2")
    assert (second.phase, second.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    [event] = limit_events(store, second)
    assert event["limit"] == "safety.max_total_cost"
    assert event["used"] == pytest.approx(6 * CALL_COST)


@pytest.mark.parametrize(
    ("cap", "applied"), [(3 * CALL_COST * 0.99, False), (3 * CALL_COST * 1.01, True)]
)
def test_guards_max_total_cost_asks_before_a_tool_call(
    sqlite_store: Store,
    files: Path,
    openai_server: OpenAIServer,
    tmp_path: Path,
    cap: float,
    applied: bool,
) -> None:
    """Three calls ($0.00081) before the write: the guard's cap, reached, asks a person
    first (before, the guard saw only the tools' own cost: $0)."""
    data = ProfileRegistry.builtins()["ci"].model_dump(mode="python")
    data.update(name="local/guarded", guards={"max_total_cost": cap})
    ProfileRegistry(sqlite_store).add(AutomationProfile.model_validate(data))
    plan = run(sqlite_store, openai_server, tmp_path, profile="local/guarded")
    if applied:
        assert plan.state is PlanState.APPLIED
        return
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    with sqlite_store.unit_of_work() as uow:
        [approval] = uow.approvals.pending(plan.plan_id)
    assert approval.kind is ApprovalKind.GUARD
    assert f"cost so far {3 * CALL_COST:g} reached the budget cap" in approval.question
    assert show_plan(sqlite_store, plan.plan_id).usage.tool_calls == 0  # the write waits


@pytest.mark.parametrize("capped", [True, False], ids=["cost-limit", "no-cost-limit"])
def test_a_model_with_no_price_stops_a_plan_with_a_cost_limit(
    sqlite_store: Store, files: Path, openai_server: OpenAIServer, tmp_path: Path, capped: bool
) -> None:
    """Unpriced calls would count $0 and slip past any cost limit: the plan asks first."""
    for side in ("input", "output"):
        unset_setting(sqlite_store, f"prices.openai:gpt-4o-mini.{side}_per_mtok")
    limits: dict[str, Any] = {"max_cost_usd": 1.0} if capped else {}
    plan = run(sqlite_store, openai_server, tmp_path, **limits)
    if not capped:
        assert plan.state is PlanState.APPLIED
        assert {c["priced"] for c in usage_events(sqlite_store, plan)} == {False}
        return
    assert (plan.phase, plan.state) == (Phase.STRATEGIZE, PlanState.AWAITING_APPROVAL)
    with sqlite_store.unit_of_work() as uow:
        [approval] = uow.approvals.pending(plan.plan_id)
    assert approval.question.startswith(
        "openai:gpt-4o-mini has no price, so limits.max_cost_usd cannot count its 1 call"
    )
    assert limit_events(sqlite_store, plan) == [
        {"limit": "prices.openai:gpt-4o-mini", "allowed": 0, "used": 1, "action": "pause"}
    ]
    answer_approval(sqlite_store, approval.approval_id, approve=True, by="alice")
    plan = resume_plan(sqlite_store, plan.plan_id, options_of(tmp_path))
    assert plan.state is PlanState.APPLIED  # accepted once for that model
