"""Pre-flight checks, run before a plan enters Strategize (behaviour spec, "Guardrails").

Seven checks, in order; the plan is rejected on the first that fails, with one line naming
the check and the fix. All results are returned for interfaces that show the whole list.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.profile import AutomationProfile
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.tool import ToolCategory, ToolSpec

SANDBOXABLE_KINDS = ("git", "filesystem", "database")


class Check(StrEnum):
    ACTION_SCHEMA = "action schema"
    ACTOR_AVAILABILITY = "actor availability"
    TOOL_EXISTENCE = "skill and tool existence"
    AUTOMATION_POLICY = "automation policy"
    ROLLBACK_FEASIBILITY = "rollback feasibility"
    RESOURCE_ACCESSIBILITY = "resource accessibility"
    VALIDATION_ATTACHMENTS = "validation attachment resolution"


class ToolCatalog(Protocol):
    def get(self, name: str) -> ToolSpec | None: ...


@runtime_checkable
class ArgumentCheck(Protocol):
    """A catalog that knows its tools' parameters (``ToolRegistry``): pre-flight then refuses
    a scripted call the tool would refuse, before the plan is created rather than at Execute."""

    def argument_problem(self, name: str, arguments: object) -> str | None: ...


ARGUMENTS_FIX = (
    "fix the call's arguments in the action file (`agents action validate` on it lists "
    "every problem with its line)"
)


class PreflightError(UserError):
    """A pre-flight check failed; the plan was not created."""

    def __init__(self, check: Check, problem: str, fix: str) -> None:
        self.check = check
        super().__init__(f"pre-flight check '{check}' failed: {problem}", fix)


@dataclass(frozen=True)
class CheckResult:
    check: Check
    passed: bool
    problem: str | None = None
    fix: str | None = None


@dataclass(frozen=True)
class PreflightContext:
    """Everything the checks look at. ``resources`` maps each id the action names to the
    registered resource, or None when it is not registered."""

    profile: AutomationProfile
    tools: ToolCatalog
    actors: frozenset[str]
    resources: Mapping[str, Resource | None]

    def specs(self, action: Action) -> list[ToolSpec]:
        """The registered tools among those the action names (the others fail _tools_exist)."""
        return [s for s in (self.tools.get(t) for t in action.skill_set) if s is not None]


def parse_action(raw: Mapping[str, Any] | Action) -> Action:
    if isinstance(raw, Action):
        return raw
    try:
        return Action.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        # Keys come from the file: repr() keeps a key holding a newline on one line.
        where = ".".join(p if _plain_key(p) else repr(p) for p in map(str, first["loc"]))
        message = " ".join(str(first["msg"]).split())
        raise PreflightError(
            Check.ACTION_SCHEMA,
            f"{where or 'action'}: {message}",
            "fix the action file (docs/actions.md)",
        ) from exc


def _plain_key(part: str) -> bool:
    return part.isprintable() and "." not in part and part.strip() == part and part != ""


def run_preflight(raw: Mapping[str, Any] | Action, context: PreflightContext) -> list[CheckResult]:
    """Run every check; raise PreflightError for the first that fails."""
    action = parse_action(raw)
    results = [CheckResult(Check.ACTION_SCHEMA, True)]
    checks: list[tuple[Check, Callable[[Action, PreflightContext], tuple[str, str] | None]]] = [
        (Check.ACTOR_AVAILABILITY, _actors),
        (Check.TOOL_EXISTENCE, _tools_exist),
        (Check.AUTOMATION_POLICY, _policy),
        (Check.ROLLBACK_FEASIBILITY, _rollback),
        (Check.RESOURCE_ACCESSIBILITY, _resources),
        (Check.VALIDATION_ATTACHMENTS, _validations),
    ]
    for check, run in checks:
        failure = run(action, context)
        if failure is not None:
            raise PreflightError(check, *failure)
        results.append(CheckResult(check, True))
    return results


def _actors(action: Action, context: PreflightContext) -> tuple[str, str] | None:
    missing = [
        a for a in (action.actors.strategy, action.actors.execution) if a not in context.actors
    ]
    if missing:
        known = ", ".join(sorted(context.actors)) or "none"
        return f"actor {missing[0]} is not registered", f"use one of: {known}"
    return None


def _tools_exist(action: Action, context: PreflightContext) -> tuple[str, str] | None:
    missing = [t for t in action.skill_set if context.tools.get(t) is None]
    if missing:
        return (
            f"tool {', '.join(missing)} is not registered",
            "register the tool or remove it from the action",
        )
    wrong = tool_call_problem(action, context.tools)
    if wrong is not None:
        return wrong, ARGUMENTS_FIX
    return None


def tool_call_problem(action: Action, tools: ToolCatalog) -> str | None:
    """The first scripted tool call of ``action`` whose arguments its tool would refuse, as
    `agents action validate` reports it; None when all fit or ``tools`` cannot tell."""
    if not isinstance(tools, ArgumentCheck):
        return None
    for point in action.decisions:
        for alternative in point.alternatives:
            for call in alternative.calls:
                wrong = tools.argument_problem(call.tool, call.arguments)
                if wrong is not None:
                    return (
                        f"decision {point.key}, alternative {alternative.option!r}: "
                        f"{call.tool}: {wrong}"
                    )
    return None


def _policy(action: Action, context: PreflightContext) -> tuple[str, str] | None:
    profile = context.profile
    safety = profile.safety
    specs = context.specs(action)
    unsafe = [s.name for s in specs if s.unsafe]
    if unsafe and not safety.allow_unsafe_tools:
        return (
            f"tool {', '.join(unsafe)} is marked unsafe and profile {profile.name} blocks unsafe tools",
            "remove the tool or choose a profile that allows unsafe tools",
        )
    if safety.allowed_skill_categories:
        outside = [s.name for s in specs if s.category.value not in safety.allowed_skill_categories]
        if outside:
            allowed = ", ".join(safety.allowed_skill_categories)
            return (
                f"tool {', '.join(outside)} is outside the categories profile {profile.name} allows ({allowed})",
                "remove the tool or allow its category in the profile",
            )
    if safety.require_sandbox:
        bare = [
            r.resource_id
            for r in context.resources.values()
            if r is not None
            and r.kind in SANDBOXABLE_KINDS
            and r.sandbox_strategy is SandboxStrategyName.NONE
        ]
        if bare:
            return (
                f"resource {', '.join(bare)} has sandbox strategy none but profile {profile.name} requires a sandbox",
                "give the resource a sandbox strategy, or use a profile without require_sandbox",
            )
    return None


def _rollback(action: Action, context: PreflightContext) -> tuple[str, str] | None:
    if not context.profile.safety.require_checkpoints:
        return None
    specs = context.specs(action)
    blind = [s.name for s in specs if not s.checkpointable]
    if blind:
        return (
            f"tool {', '.join(blind)} is not checkpointable and profile {context.profile.name} "
            "requires checkpoints",
            "remove the tool, or use a profile without require_checkpoints",
        )
    off = [r.resource_id for r in context.resources.values() if r and not r.checkpoint_enabled]
    if off:
        return (
            f"resource {', '.join(off)} has checkpointing off and profile "
            f"{context.profile.name} requires checkpoints",
            "turn its checkpointing on, or use a profile without require_checkpoints",
        )
    return None


def _resources(action: Action, context: PreflightContext) -> tuple[str, str] | None:
    for resource_id in action.resources:
        resource = context.resources.get(resource_id)
        if resource is None:
            return f"resource {resource_id} is not registered", "register it first"
        problem = reachability_problem(resource)
        if problem is not None:
            return f"resource {resource_id}: {problem}", "fix its location or make it reachable"
    return None


def reachability_problem(resource: Resource) -> str | None:
    """A shallow check that the resource is there: a repository, a folder, a database."""
    location = resource.location
    if resource.kind == "git":
        probe = subprocess.run(
            ["git", "-C", location, "rev-parse", "--git-dir"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return None if probe.returncode == 0 else f"{location} is not a git repository"
    if resource.kind == "filesystem":
        return None if Path(location).is_dir() else f"folder {location} does not exist"
    if resource.kind == "database":
        from cleveragents_tui.sandbox.database_probe import connect_problem

        return connect_problem(location)
    return None  # external resources: nothing local to check


def _validations(action: Action, context: PreflightContext) -> tuple[str, str] | None:
    for name in action.validations:
        spec = context.tools.get(name)
        if spec is None:
            return (
                f"validation {name} is not registered",
                "register the validation tool or detach it",
            )
        if spec.category is not ToolCategory.VALIDATION:
            return f"{name} is a {spec.category} tool, not a validation", "attach a validation tool"
    return None
