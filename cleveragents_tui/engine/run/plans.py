"""Creating plans (profile resolved and locked, pre-flight first) and changing their profile.
What happens when a limit is exceeded is engine/run/policing.py's."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from cleveragents_tui.automation.precedence import (
    GLOBAL_SCOPE,
    PROFILE_KEY,
    ProfileSource,
    ResolvedProfile,
    project_scope,
    resolve_profile,
)
from cleveragents_tui.automation.preflight import (
    ARGUMENTS_FIX,
    Check,
    PreflightContext,
    PreflightError,
    ToolCatalog,
    parse_action,
    run_preflight,
    tool_call_problem,
)
from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.engine.core.reasoner_choice import CHAT_ACTOR
from cleveragents_tui.store.store import Store

SCRIPTED_ACTOR = "local/scripted"
ACTORS = frozenset({SCRIPTED_ACTOR, CHAT_ACTOR})  # the actors a plan may name
ROOT_KEY = "prompt"  # the step key of a plan's root decision, its prompt


def effective_profile(
    store: Store, *, override: str | None, action: Action, project: str | None
) -> ResolvedProfile:
    """plan > action > project > global > the default (``manual``)."""
    with store.unit_of_work() as uow:
        project_value = uow.settings.get(project_scope(project), PROFILE_KEY) if project else None
        global_value = uow.settings.get(GLOBAL_SCOPE, PROFILE_KEY)
    return resolve_profile(
        plan_override=override,
        action_profile=action.automation_profile,
        project_profile=str(project_value) if project_value else None,
        global_profile=str(global_value) if global_value else None,
    )


def _subactions(action: Action) -> Iterator[Action]:
    for sub in action.subactions:
        yield sub
        yield from _subactions(sub)


def _check_subactions(action: Action, tools: ToolCatalog, registered: Mapping[str, Any]) -> None:
    """What a child plan to come names must be registered now, as `action create` requires:
    else the plan is refused only halfway, when its spawn runs the child's pre-flight."""
    for sub in _subactions(action):
        missing = [r for r in sub.resources if r not in registered]
        if missing:
            raise PreflightError(
                Check.RESOURCE_ACCESSIBILITY,
                f"subaction {sub.name}: resource {missing[0]} is not registered",
                "register it first: agents resource add",
            )
        unknown = [t for t in sub.skill_set if tools.get(t) is None]
        if unknown:
            raise PreflightError(
                Check.TOOL_EXISTENCE,
                f"subaction {sub.name}: tool {unknown[0]} is not registered",
                "register the tool or remove it from the subaction",
            )
        wrong = tool_call_problem(sub, tools)
        if wrong is not None:
            raise PreflightError(
                Check.TOOL_EXISTENCE, f"subaction {sub.name}: {wrong}", ARGUMENTS_FIX
            )


def create_plan(
    store: Store,
    raw_action: Mapping[str, Any] | Action,
    *,
    tools: ToolCatalog,
    actors: frozenset[str],
    project: str | None = None,
    profile_override: str | None = None,
    parent: Plan | None = None,
    spawning_decision_id: str | None = None,
) -> tuple[Plan, ResolvedProfile]:
    """Run pre-flight and store a new plan with its automation profile locked.

    A child plan inherits its parent's (locked) profile. Nothing is stored if any check fails.
    """
    action = parse_action(raw_action)
    project = project or action.project
    if parent is not None:
        resolved = ResolvedProfile(parent.automation_profile, ProfileSource.PARENT)
    else:
        resolved = effective_profile(
            store, override=profile_override, action=action, project=project
        )
    profile = ProfileRegistry(store).get(resolved.name)
    with store.unit_of_work() as uow:
        registered = {r.resource_id: r for r in uow.resources.registered()}  # not removed
    resources = {rid: registered.get(rid) for rid in action.resources}
    run_preflight(action, PreflightContext(profile, tools, actors, resources))
    _check_subactions(action, tools, registered)
    plan = Plan(
        action=action.name,
        title=action.description or None,
        project=project,
        automation_profile=profile.name,
        parent_plan_id=parent.plan_id if parent else None,
        spawning_decision_id=spawning_decision_id,
    )
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.flush()
        uow.events.append(
            "plan_created",
            {
                "action": action.name,
                "profile": profile.name,
                "profile_source": resolved.source.value,
            },
            plan_id=plan.plan_id,
        )
        uow.commit()
    return plan, resolved


def create_child(
    store: Store, tools: ToolCatalog, parent: Plan, action: Action, spawning_decision_id: str
) -> Plan:
    """A child plan of ``parent`` (its project, its locked profile), spawned by a decision."""
    child, _ = create_plan(
        store,
        action,
        tools=tools,
        actors=ACTORS,
        project=parent.project,
        parent=parent,
        spawning_decision_id=spawning_decision_id,
    )
    return child


def change_profile(store: Store, plan_ref: str, profile_name: str) -> Plan:
    """Change a plan's locked profile explicitly: child plans spawned from now on inherit it;
    children already created keep theirs. Refused for an applied or cancelled plan."""
    profile = ProfileRegistry(store).get(profile_name)
    with store.unit_of_work(write=True) as uow:
        plan_id = uow.plans.resolve(plan_ref)
        plan = uow.plans.get(plan_id)
        if plan.state.is_terminal:
            raise UserError(
                f"plan {plan_id} is {plan.state.value}: its profile no longer matters",
                "change the profile of a plan that is still open (`agents plan list`)",
            )
        updated = uow.plans.save(
            plan.model_copy(update={"automation_profile": profile.name, "updated_at": utc_now()})
        )
        uow.events.append(
            "profile_changed",
            {"from": plan.automation_profile, "to": profile.name},
            plan_id=plan_id,
        )
        uow.commit()
    return updated
