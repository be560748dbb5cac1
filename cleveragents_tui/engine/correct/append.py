"""Append mode: a corrective child plan (behavior.md "Append"; docs/corrections.md "Append").

An append leaves the plan's history alone. It starts a child plan that begins from the
plan's *current* state and runs only the corrective work the guidance asks for — never the
plan's action again (that would redo work already done: a second release row, another
notification, or a strategy an earlier revert replaced).

The corrective work, for the scripted reasoner, is :func:`corrective_action`: the plan's
action cut down to the corrected decision's decision point and the points that exist only
for a choice of it (their ``when:`` names it, transitively), with the guidance aimed at the
corrected point. Points that merely follow it (its children, ``depends_on``) are the plan's
own work, already done: they are not repeated. A model reasoner gets the same cut-down
action, whose prompt is the guidance.

Where it works: while the plan is not applied, in the plan's own sandboxes, on top of what
is there, landing once with the plan's Apply. Once the plan is applied, its sandboxes have
landed: the appended plan gets sandboxes of its own, made from the real resources, and
lands on its own (its own Apply gate, its own apply branch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from cleveragents_tui.actors.base import ActorState
from cleveragents_tui.actors.reasoners.scripted import ScriptedReasoner
from cleveragents_tui.actors.tools import ToolRegistry, default_registry
from cleveragents_tui.domain.action import Action, DecisionPoint
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.core.in_flight import running_children
from cleveragents_tui.engine.core.recorder import Correction
from cleveragents_tui.engine.run.plans import create_child
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions
from cleveragents_tui.store.store import Store

WHOLE_PLAN = "*"


@dataclass(frozen=True)
class AppendStep:
    """One decision the appended plan will make (predicted for the scripted reasoner)."""

    key: str
    phase: Phase
    question: str
    chosen_option: str
    guided: bool  # the guidance selected it (False: the point's default or fallback)
    tool_calls: tuple[str, ...]  # tool names, in the order they run
    spawns: tuple[str, ...]


@dataclass(frozen=True)
class IrreversibleCall:
    tool: str
    side_effects: tuple[str, ...]


@dataclass(frozen=True)
class AppendPlan:
    """What an append will do: the appended plan's decisions, where it works, how it lands."""

    steps: tuple[AppendStep, ...]
    predicted: bool  # the scripted reasoner makes exactly ``steps``; else the actor decides
    sandbox_host: str | None  # the plan whose sandboxes it works in; None: its own
    resources: tuple[str, ...]
    applies_on_its_own: bool  # its own Apply (the plan is applied); else with the plan's
    irreversible_calls: tuple[IrreversibleCall, ...] = ()


def guidance_key(decision: Decision) -> str:
    """The key the guidance is aimed at: the corrected point's, or the whole plan's."""
    return decision.step_key or WHOLE_PLAN


def corrective_action(
    action: Action, decision: Decision, guidance: str, current: Mapping[str, str]
) -> Action:
    """The appended plan's action: ``action`` cut down to the corrected point and the points
    whose ``when:`` depends on its choice (transitively). ``current`` is the plan's current
    choices (step key -> chosen option): a ``when:`` on a point left out is decided by the
    plan as it is (a point whose condition does not hold there is left out too).

    References to points left out are dropped: ``parent`` goes to the appended plan's root,
    ``depends_on`` keeps the points it holds, and ``revise_strategy`` (a phase reversion of
    the plan's strategy) is not the appended plan's to make. The actors keep the plan's whole
    skill set (the tools of points left out too). A decision without a point of its own (the
    plan's root, a guidance decision, a model's decision) gives an action without points:
    the scripted reasoner has nothing to do, a model follows the prompt.
    """
    kept: list[DecisionPoint] = []
    keys: set[str] = set()
    for point in action.decisions:
        target = point.key == decision.step_key
        follows = any(k in keys for k in point.when)
        if not (target or follows):
            continue
        outside = {k: v for k, v in point.when.items() if k not in keys}
        if not target and any(current.get(k) != v for k, v in outside.items()):
            continue  # its other conditions do not hold in the plan as it is
        keys.add(point.key)
        kept.append(point)
    strategize = {p.key for p in kept if p.type.phase is Phase.STRATEGIZE}
    points = [
        point.model_copy(
            update={
                "parent": point.parent if point.parent in keys else None,
                "depends_on": tuple(k for k in point.depends_on if k in keys),
                "when": {k: v for k, v in point.when.items() if k in keys},
                "alternatives": tuple(
                    a
                    if a.revise_strategy is None or a.revise_strategy in strategize
                    else a.model_copy(update={"revise_strategy": None})
                    for a in point.alternatives
                ),
            }
        )
        for point in kept
    ]
    return Action.model_validate(
        {
            **action.model_dump(mode="json"),
            "description": f"Corrective plan for decision {decision.decision_id}: {guidance}",
            "prompt": guidance,
            "tools": list(action.skill_set),  # every tool the plan's actors could use
            "decisions": [p.model_dump(mode="json") for p in points],
        }
    )


def seed_guidance(decision: Decision, guidance: str, chosen: str | None) -> list[dict[str, str]]:
    """The guidance the appended plan's actors start with; ``chosen``: the alternative the
    preview said the corrected point takes (named by the user, or selected), pinned."""
    entry = {"key": guidance_key(decision), "text": guidance}
    return [entry if chosen is None else {**entry, "choose": chosen}]


def predict(
    action: Action,
    decision: Decision,
    guidance: str,
    chosen: str | None,
    registry: ToolRegistry | None = None,
) -> tuple[tuple[AppendStep, ...], tuple[IrreversibleCall, ...]]:
    """What the scripted reasoner will decide in the appended plan (it is deterministic),
    and the irreversible tool calls those decisions make, in order."""
    registry = registry or default_registry()
    made: dict[str, str] = {}
    reasoner = ScriptedReasoner(action, lambda: made)
    state = cast(
        ActorState,
        {
            "plan_id": "",
            "phase": "",
            "position": 0,
            "guidance": seed_guidance(decision, guidance, chosen),
            "notes": [],
            "done": False,
        },
    )
    steps: list[AppendStep] = []
    calls: list[IrreversibleCall] = []
    for phase in (Phase.STRATEGIZE, Phase.EXECUTE):
        for _ in action.decisions:  # each point is decided at most once
            proposal = reasoner.propose(state, phase)
            if proposal is None:
                break
            made[proposal.key] = proposal.chosen_option
            runs = phase is Phase.EXECUTE  # Strategize is read-only: its calls never run
            tools = tuple(c.tool for c in proposal.tool_calls) if runs else ()
            steps.append(
                AppendStep(
                    key=proposal.key,
                    phase=phase,
                    question=proposal.question,
                    chosen_option=proposal.chosen_option,
                    guided=proposal.reasoning is not None,
                    tool_calls=tools,
                    spawns=proposal.spawn,
                )
            )
            for tool in tools:
                spec = registry.get(tool)
                if spec is not None and spec.irreversible:
                    calls.append(IrreversibleCall(tool, spec.side_effects))
    return tuple(steps), tuple(calls)


def _irreversible_tools(
    tools: tuple[str, ...], registry: ToolRegistry
) -> tuple[IrreversibleCall, ...]:
    specs = [registry.get(tool) for tool in tools]
    return tuple(IrreversibleCall(s.name, s.side_effects) for s in specs if s and s.irreversible)


def plan_append(
    store: Store, plan: Plan, decision: Decision, guidance: str, chosen: str | None
) -> AppendPlan:
    """What appending to ``decision`` with ``guidance`` will do. Reads only."""
    with store.unit_of_work() as uow:
        action = Action.model_validate(uow.plan_actions.get(plan.plan_id))
        steps_now = uow.decisions.current_steps(plan.plan_id)
        host = uow.plan_actions.sandbox_plan(plan.plan_id)
    current = {key: option for key, (_, option) in steps_now.items()}
    child = corrective_action(action, decision, guidance, current)
    # A decision with a point of its own is re-made by the scripted reasoner, exactly as
    # predicted; any other (a model's, the root, a guidance decision) leaves the corrective
    # work to the actor: each irreversible tool it may call is named, once.
    scripted = any(p.key == decision.step_key for p in action.decisions)
    steps, calls = predict(child, decision, guidance, chosen) if scripted else ((), ())
    if not scripted:
        calls = _irreversible_tools(child.skill_set, default_registry())
    applied = plan.state is PlanState.APPLIED
    return AppendPlan(
        steps=steps,
        predicted=scripted,
        sandbox_host=None if applied else host,
        resources=child.resources,
        applies_on_its_own=applied,
        irreversible_calls=calls,
    )


def create_appended(
    store: Store,
    plan_id: str,
    decision: Decision,
    guidance: str,
    chosen: str | None,
    options: RunOptions,
) -> Plan:
    """Create the appended plan under ``plan_id``, its actors seeded with the guidance (the
    caller runs it, :func:`run_appended`).

    Not applied: it works in the plan's sandboxes (``sandbox_plan_id``) and waits, completed,
    for the plan's Apply. Applied: it gets its own sandboxes and reaches its own Apply gate.
    """
    from cleveragents_tui.actors.checkpointer import open_checkpointer  # see runner._run_actor
    from cleveragents_tui.actors.graphs import Actor

    with store.unit_of_work() as uow:
        parent = uow.plans.get(plan_id)
        action = Action.model_validate(uow.plan_actions.get(plan_id))
        current = {k: option for k, (_, option) in uow.decisions.current_steps(plan_id).items()}
    runner = PlanRunner(store, plan_id, options)
    child_action = corrective_action(action, decision, guidance, current)
    child = create_child(store, runner.registry, parent, child_action, decision.decision_id)
    host = None if parent.state is PlanState.APPLIED else runner.sandboxes.host_plan_id
    with store.unit_of_work(write=True) as uow:
        uow.plan_actions.save(
            child.plan_id, child_action.model_dump(mode="json"), sandbox_plan_id=host
        )
        uow.commit()
    with open_checkpointer(store.engine.url) as saver:
        for phase in (Phase.STRATEGIZE, Phase.EXECUTE):
            Actor(saver, child.plan_id, phase, lambda state, r: {}).seed(
                {"guidance": seed_guidance(decision, guidance, chosen)}
            )
    return child


def run_appended(
    store: Store, child: Plan, decision: Decision, guidance: str, options: RunOptions
) -> Plan:
    """Run the appended plan as far as its profile allows."""
    replay = Correction(decision.decision_id, guidance)
    with running_children(decision.plan_id, {child.plan_id: child.action}):  # the app's wait
        return PlanRunner(store, child.plan_id, options, correction=replay).run()
