"""Actions: what a plan runs. An action file (YAML, docs/actions.md) names the resources,
actors, tools, validations and limits, and — for the scripted reasoner — the decision
points with their alternatives and the tool calls each alternative makes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.ids import NamespacedName
from cleveragents_tui.domain.limits import PlanLimits
from cleveragents_tui.domain.text import RequiredText, Text

_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def _key(value: str) -> str:
    if not _KEY.match(value):
        raise ValueError(f"{value!r} is not a decision key (lower-case letters, digits, '-', '_')")
    return value


Key = Annotated[str, AfterValidator(_key)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    tool: NamespacedName
    arguments: dict[str, Any] = Field(default_factory=dict)


class Alternative(_Frozen):
    """One option of a decision point; ``match`` words steer correction guidance to it."""

    option: RequiredText
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    rationale: Text | None = None
    match: tuple[RequiredText, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    spawn: tuple[NamespacedName, ...] = ()  # for subplan spawns: the child plans' actions
    # Execute only: choosing this reports that the strategy decision with this key is too
    # tight; the plan reverts to Strategize there, with ``rationale`` as the guidance.
    revise_strategy: Key | None = None
    # Execute only: the calls that fix the work when a validation this alternative runs
    # fails, made before each retry (the scripted form of "fix, then revalidate").
    fix: tuple[ToolCall, ...] = ()

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """Every call the alternative may make: its tool calls, then its fix."""
        return (*self.tool_calls, *self.fix)


class DecisionPoint(_Frozen):
    key: Key
    type: DecisionType
    question: RequiredText
    parent: Key | None = None  # None: under the plan's prompt_definition root
    depends_on: tuple[Key, ...] = ()
    # Applies only while each named earlier decision has the given chosen option.
    when: dict[Key, RequiredText] = Field(default_factory=dict)
    alternatives: tuple[Alternative, ...] = Field(min_length=1)
    choose: RequiredText | None = None  # the option chosen without guidance (default: first)
    fallback: RequiredText | None = None  # when guidance matches no alternative (default: choose)

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        if self.type in (DecisionType.PROMPT_DEFINITION, DecisionType.USER_INTERVENTION):
            raise ValueError(
                f"{self.type} decisions are made by the system, not listed in an action"
            )
        options = [a.option for a in self.alternatives]
        if len(set(options)) != len(options):
            raise ValueError(f"decision {self.key}: alternatives must have distinct options")
        if self.type.phase is not Phase.EXECUTE:
            if any(a.revise_strategy for a in self.alternatives):
                raise ValueError(
                    f"decision {self.key}: only Execute decisions can ask to revise the strategy"
                )
            if any(a.fix for a in self.alternatives):
                raise ValueError(
                    f"decision {self.key}: only Execute decisions run validations to fix"
                )
        spawning = self.type in (DecisionType.SUBPLAN_SPAWN, DecisionType.SUBPLAN_PARALLEL_SPAWN)
        if not spawning and any(a.spawn for a in self.alternatives):
            raise ValueError(f"decision {self.key}: only subplan spawns may spawn child plans")
        for field in ("choose", "fallback"):
            value = getattr(self, field)
            if value is not None and value not in options:
                raise ValueError(
                    f"decision {self.key}: {field} {value!r} is not one of its alternatives"
                )
        return self

    @property
    def default(self) -> Alternative:
        return next(
            a for a in self.alternatives if a.option == (self.choose or self.alternatives[0].option)
        )


class ActorNames(_Frozen):
    strategy: NamespacedName = "local/scripted"
    execution: NamespacedName = "local/scripted"


class Action(_Frozen):
    name: NamespacedName
    description: Text = ""
    prompt: RequiredText
    project: Text | None = None
    automation_profile: Text | None = None
    actors: ActorNames = ActorNames()
    resources: tuple[NamespacedName, ...] = ()
    tools: tuple[NamespacedName, ...] = ()  # the actors' skill set (tool calls add to it)
    validations: tuple[NamespacedName, ...] = ()
    limits: PlanLimits = PlanLimits()
    decisions: tuple[DecisionPoint, ...] = ()
    # The actions of child plans its subplan spawns may start, so an action file is
    # self-contained (and stored whole with the plan).
    subactions: tuple[Action, ...] = ()

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        problems = rule_problems(self.decisions, [a.name for a in self.subactions])
        if problems:
            raise ValueError(problems[0][1])
        return self

    def subaction(self, name: str) -> Action:
        return next(a for a in self.subactions if a.name == name)

    @property
    def skill_set(self) -> tuple[str, ...]:
        """Every tool the actors may use: the declared ones and those the alternatives call."""
        called = (c.tool for p in self.decisions for a in p.alternatives for c in a.calls)
        return tuple(dict.fromkeys((*self.tools, *called)))


Loc = tuple[str | int, ...]


def rule_problems(
    decisions: Sequence[DecisionPoint | str | None], subaction_names: Sequence[str]
) -> list[tuple[Loc, str]]:
    """Every rule across an action's decision points and subactions that is broken, each with
    where it is (relative to the action). A point that failed its own validation (``agents
    action validate`` reports it separately) is given by its key, or ``None`` when even that
    is unusable: references past such a point are not judged."""
    problems: list[tuple[Loc, str]] = []
    seen: set[str] = set()
    unknown_earlier = False
    for i, point in enumerate(decisions):
        key = point.key if isinstance(point, DecisionPoint) else point
        if key is None:
            unknown_earlier = True
            continue
        if key in seen:
            problems.append((("decisions", i, "key"), f"decision key {key!r} is used twice"))
        if isinstance(point, DecisionPoint):
            refs: list[tuple[Loc, str | None]] = [(("decisions", i, "parent"), point.parent)]
            refs += [(("decisions", i, "depends_on", j), r) for j, r in enumerate(point.depends_on)]
            refs += [(("decisions", i, "when", r), r) for r in point.when]
            for loc, ref in refs:
                if ref is not None and ref not in seen and not unknown_earlier:
                    problems.append(
                        (loc, f"decision {key} refers to {ref!r}, which is not an earlier decision")
                    )
        seen.add(key)
    names = set(subaction_names)
    if len(names) != len(subaction_names):
        problems.append((("subactions",), "subactions must have distinct names"))
    typed = [p if isinstance(p, DecisionPoint) else None for p in decisions]
    strategize = {p.key for p in typed if p is not None and p.type.phase is Phase.STRATEGIZE}
    for i, point in enumerate(typed):
        if point is None:
            continue
        for j, alternative in enumerate(point.alternatives):
            where: Loc = ("decisions", i, "alternatives", j)
            revise = alternative.revise_strategy
            if revise and revise not in strategize and not unknown_earlier:
                problems.append(
                    (
                        (*where, "revise_strategy"),
                        f"decision {point.key} revises {revise}, which is not a "
                        "Strategize decision of this action",
                    )
                )
            for k, child in enumerate(alternative.spawn):
                if child not in names:
                    problems.append(
                        (
                            (*where, "spawn", k),
                            f"decision {point.key} spawns {child}, which is not one of the subactions",
                        )
                    )
    return problems
