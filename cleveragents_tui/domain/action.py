"""Actions: what a plan runs. An action file (YAML, docs/actions.md) names the resources,
actors, tools, validations and limits, and — for the scripted reasoner — the decision
points with their alternatives and the tool calls each alternative makes.
"""

from __future__ import annotations

import re
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
        if self.type.phase is not Phase.EXECUTE and any(
            a.revise_strategy for a in self.alternatives
        ):
            raise ValueError(
                f"decision {self.key}: only Execute decisions can ask to revise the strategy"
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
        seen: set[str] = set()
        for point in self.decisions:
            if point.key in seen:
                raise ValueError(f"decision key {point.key!r} is used twice")
            for ref in (point.parent, *point.depends_on, *point.when):
                if ref is not None and ref not in seen:
                    raise ValueError(
                        f"decision {point.key} refers to {ref!r}, which is not an earlier decision"
                    )
            seen.add(point.key)
        names = {a.name for a in self.subactions}
        if len(names) != len(self.subactions):
            raise ValueError("subactions must have distinct names")
        strategize = {p.key for p in self.decisions if p.type.phase is Phase.STRATEGIZE}
        for point in self.decisions:
            for alternative in point.alternatives:
                if alternative.revise_strategy and alternative.revise_strategy not in strategize:
                    raise ValueError(
                        f"decision {point.key} revises {alternative.revise_strategy}, which is not a "
                        "Strategize decision of this action"
                    )
                for child in alternative.spawn:
                    if child not in names:
                        raise ValueError(
                            f"decision {point.key} spawns {child}, which is not one of the subactions"
                        )
        return self

    def subaction(self, name: str) -> Action:
        return next(a for a in self.subactions if a.name == name)

    @property
    def skill_set(self) -> tuple[str, ...]:
        """Every tool the actors may use: the declared ones and those the alternatives call."""
        called = (c.tool for p in self.decisions for a in p.alternatives for c in a.tool_calls)
        return tuple(dict.fromkeys((*self.tools, *called)))
