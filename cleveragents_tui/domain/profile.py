"""Automation profiles: confidence thresholds, the safety sub-model and automation guards.

An automation profile maps each of eleven automatable tasks (:class:`AutomationFlag`) to a
confidence threshold in [0.0, 1.0]. The system proceeds automatically with a task when the
Semantic Escalation confidence for it is at or above the threshold, and otherwise pauses
for a person (see :meth:`AutomationProfile.proceeds` for the exact rule).

The flag *names* are historical and do not describe what they gate: ``select_tool`` gates
the Execute → Apply transition, ``approve_plan`` gates restoring from a checkpoint after a
failure. :attr:`AutomationFlag.gates` and :attr:`AutomationFlag.description` give the
behaviour of each flag as the specification's Description column states it.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Annotated, NamedTuple, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    field_validator,
    model_validator,
)

from cleveragents_tui.domain.ids import NAMESPACED_NAME
from cleveragents_tui.domain.text import RequiredText, Text

ALWAYS_AUTOMATIC = 0.0
ALWAYS_MANUAL = 1.0


class _FlagInfo(NamedTuple):
    gates: str
    description: str
    when_met: str
    when_below: str


_FLAG_INFO: dict[str, _FlagInfo] = {
    "decompose_task": _FlagInfo(
        "enter Strategize after `plan use`",
        "Automatically enter Strategize after plan use",
        "Strategize begins immediately",
        "the system pauses after plan creation for confirmation before entering Strategize",
    ),
    "create_tool": _FlagInfo(
        "Strategize → Execute",
        "Automatically proceed from Strategize to Execute",
        "Execute begins when Strategize completes",
        "the system pauses for user review",
    ),
    "select_tool": _FlagInfo(
        "Execute → Apply",
        "Automatically proceed from Execute to Apply",
        "Apply begins when Execute completes",
        "the system pauses for user diff review",
    ),
    "edit_code": _FlagInfo(
        "decisions during Strategize",
        "Automatically make decisions during Strategize",
        "the strategy actor makes the decision autonomously",
        "the system pauses at the decision point for user input",
    ),
    "execute_command": _FlagInfo(
        "decisions during Execute",
        "Automatically make decisions during Execute",
        "the execution actor makes the decision autonomously",
        "the system pauses at the decision point for user input",
    ),
    "create_file": _FlagInfo(
        "self-fix validation failures",
        "Automatically attempt to fix validation failures",
        "the execution actor self-fixes failing validations",
        "the system pauses for user guidance",
    ),
    "delete_content": _FlagInfo(
        "revise strategy when Execute hits constraints",
        "Automatically revise strategy when Execute hits constraints",
        "the system re-runs Strategize for the affected subtree",
        "the system pauses and asks the user",
    ),
    "access_network": _FlagInfo(
        "revert a constrained Apply → Strategize",
        "Automatically revert from Apply (constrained state) to Strategize",
        "a constrained Apply automatically triggers reversion to Strategize",
        "the system pauses and asks whether to revert or cancel",
    ),
    "install_dependency": _FlagInfo(
        "spawn and execute child plans",
        "Automatically spawn and execute child plans",
        "child plans are created and executed without pausing",
        "each spawn requires approval",
    ),
    "modify_config": _FlagInfo(
        "retry transient failures",
        "Automatically retry on transient failures (network, timeout, rate-limit)",
        "the system retries with backoff",
        "the system pauses and asks the user",
    ),
    "approve_plan": _FlagInfo(
        "restore from checkpoint on failure",
        "Automatically restore from checkpoint on failure",
        "the system rolls back and retries",
        "the user decides whether to restore",
    ),
}


class AutomationFlag(StrEnum):
    """The eleven automatable tasks, in the specification's order.

    The values are the keys of a profile file. The names are kept exactly as specified even
    though they do not say what they gate; use :attr:`gates` and :attr:`description`.
    """

    DECOMPOSE_TASK = "decompose_task"
    CREATE_TOOL = "create_tool"
    SELECT_TOOL = "select_tool"
    EDIT_CODE = "edit_code"
    EXECUTE_COMMAND = "execute_command"
    CREATE_FILE = "create_file"
    DELETE_CONTENT = "delete_content"
    ACCESS_NETWORK = "access_network"
    INSTALL_DEPENDENCY = "install_dependency"
    MODIFY_CONFIG = "modify_config"
    APPROVE_PLAN = "approve_plan"

    @property
    def gates(self) -> str:
        """A short label of what the flag gates, e.g. ``Execute → Apply`` for ``select_tool``."""
        return _FLAG_INFO[self.value].gates

    @property
    def description(self) -> str:
        """The behaviour the flag automates (the specification's Description column)."""
        return _FLAG_INFO[self.value].description

    @property
    def when_met(self) -> str:
        """What happens when the confidence meets the threshold."""
        return _FLAG_INFO[self.value].when_met

    @property
    def when_below(self) -> str:
        """What happens when the confidence is below the threshold."""
        return _FLAG_INFO[self.value].when_below


BUILTIN_PROFILE_NAMES: tuple[str, ...] = (
    "manual",
    "review",
    "supervised",
    "cautious",
    "trusted",
    "auto",
    "ci",
    "full-auto",
)
"""The built-in profiles, in the specification's order. They have no namespace."""

DEFAULT_PROFILE = "manual"


def is_builtin_name(name: str) -> bool:
    return name in BUILTIN_PROFILE_NAMES


def _profile_name(value: str) -> str:
    if is_builtin_name(value) or NAMESPACED_NAME.match(value):
        return value
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", value):
        raise ValueError(
            f"{value!r} has no namespace (names without one are reserved for the built-in "
            f"profiles); call it e.g. local/{value}"
        )
    raise ValueError(
        f"{value!r} is not a namespace/name (letters, digits, '.', '_', '-'; "
        "each part starts with a letter or digit, at most 64 characters)"
    )


ProfileName = Annotated[str, AfterValidator(_profile_name)]
Threshold = Annotated[float, Field(strict=True, ge=0.0, le=1.0)]
Cost = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


def _check_confidence(confidence: float) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise TypeError(f"confidence must be a number, got {type(confidence).__name__}")
    if math.isnan(confidence) or not 0.0 <= confidence <= 1.0:
        raise ValueError(f"confidence must be between 0.0 and 1.0, got {confidence!r}")
    return float(confidence)


class SafetyProfile(BaseModel):
    """Hard safety constraints (ADR-041): binary rules that hold whatever the confidence.

    ``max_total_cost`` is a budget across all plans; ``max_cost_per_plan`` a budget per
    plan and must not exceed it when both are set. ``None`` means no limit. An empty
    ``allowed_skill_categories`` allows every category.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    require_sandbox: StrictBool = True
    require_checkpoints: StrictBool = True
    allow_unsafe_tools: StrictBool = False
    require_human_approval: StrictBool = False
    allowed_skill_categories: tuple[RequiredText, ...] = ()
    max_cost_per_plan: Cost | None = None
    max_total_cost: Cost | None = None
    max_retries_per_step: StrictInt = Field(default=3, ge=0, le=100)

    @model_validator(mode="after")
    def _cost_order(self) -> Self:
        if (
            self.max_cost_per_plan is not None
            and self.max_total_cost is not None
            and self.max_cost_per_plan > self.max_total_cost
        ):
            raise ValueError(
                f"max_cost_per_plan ({self.max_cost_per_plan}) must be <= max_total_cost "
                f"({self.max_total_cost})"
            )
        return self


class GuardScope(StrEnum):
    """Whether a guard is enforced for a plan or for a child plan (named in every reason)."""

    PLAN = "plan"
    SUBPLAN = "subplan"


class GuardResult(BaseModel):
    """The outcome of :meth:`AutomationProfile.check_guard`.

    ``allowed`` means the tool call may run automatically. When a guard stops it,
    ``requires_approval`` is true (a person may still let it run) and ``reason`` says which
    guard, naming the scope.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    allowed: bool
    reason: str | None = None
    requires_approval: bool = False

    @classmethod
    def allow(cls) -> GuardResult:
        return cls(allowed=True)

    @classmethod
    def escalate(cls, reason: str) -> GuardResult:
        return cls(allowed=False, reason=reason, requires_approval=True)


class AutomationGuard(BaseModel):
    """Runtime hooks that gate individual tool invocations (see ``check_guard``).

    ``max_total_cost`` here is a per-invocation cumulative budget (narrow scope); the safety
    profile's ``max_total_cost`` is the broad budget. Both may apply; the tighter wins.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tool_calls_per_step: StrictInt | None = Field(default=None, ge=0)
    max_total_cost: Cost | None = None
    tool_allowlist: tuple[RequiredText, ...] | None = None
    tool_denylist: tuple[RequiredText, ...] | None = None
    require_approval_for_writes: StrictBool = False
    require_approval_for_apply: StrictBool = False

    def check(
        self,
        tool_name: str,
        is_write: bool,
        cost_so_far: float,
        calls_so_far: int,
        scope: GuardScope,
        *,
        is_apply: bool = False,
    ) -> GuardResult:
        """Evaluate the guards in the specified order; the first that stops the call wins.

        Order: denylist → allowlist → tool call limit → budget cap → write approval →
        apply approval. ``calls_so_far`` counts the calls already made in this step (not
        this one): with a limit of 3 the fourth call needs approval. ``cost_so_far`` is the
        cost spent so far; the call needs approval once it reaches the cap. ``is_apply``
        marks a call made by the Apply step (landing changes on the real resources).
        """
        if calls_so_far < 0:
            raise ValueError(f"calls_so_far must be >= 0, got {calls_so_far}")
        if math.isnan(cost_so_far) or cost_so_far < 0:
            raise ValueError(f"cost_so_far must be >= 0, got {cost_so_far}")
        where = f"{GuardScope(scope).value} guard"
        if self.tool_denylist is not None and tool_name in self.tool_denylist:
            return GuardResult.escalate(
                f"{where}: tool {tool_name!r} is on the deny list and always requires approval"
            )
        if self.tool_allowlist is not None and tool_name not in self.tool_allowlist:
            return GuardResult.escalate(
                f"{where}: tool {tool_name!r} is not on the allow list, so it cannot run "
                "automatically"
            )
        if self.max_tool_calls_per_step is not None and (
            calls_so_far >= self.max_tool_calls_per_step
        ):
            return GuardResult.escalate(
                f"{where}: {calls_so_far} tool calls in this step reached the limit of "
                f"{self.max_tool_calls_per_step} (max_tool_calls_per_step)"
            )
        if self.max_total_cost is not None and cost_so_far >= self.max_total_cost:
            return GuardResult.escalate(
                f"{where}: cost so far {cost_so_far:g} reached the budget cap of "
                f"{self.max_total_cost:g} (max_total_cost)"
            )
        if self.require_approval_for_writes and is_write:
            return GuardResult.escalate(
                f"{where}: tool {tool_name!r} writes, and writes require approval "
                "(require_approval_for_writes)"
            )
        if self.require_approval_for_apply and is_apply:
            return GuardResult.escalate(
                f"{where}: tool {tool_name!r} runs in the Apply step, which requires approval "
                "(require_approval_for_apply)"
            )
        return GuardResult.allow()


class AutomationProfile(BaseModel):
    """A named set of eleven confidence thresholds, a safety profile and optional guards.

    Built-in profiles have a bare name (``manual``, ``cautious``, ...); custom profiles are
    ``namespace/name``. Every threshold is required, so a misspelt key is refused instead of
    silently defaulting.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: ProfileName
    description: Text = ""
    decompose_task: Threshold
    create_tool: Threshold
    select_tool: Threshold
    edit_code: Threshold
    execute_command: Threshold
    create_file: Threshold
    delete_content: Threshold
    access_network: Threshold
    install_dependency: Threshold
    modify_config: Threshold
    approve_plan: Threshold
    safety: SafetyProfile = Field(default_factory=SafetyProfile)
    guards: AutomationGuard | None = None

    @field_validator("description")
    @classmethod
    def _strip_description(cls, value: str) -> str:
        return value.strip()

    @property
    def is_builtin(self) -> bool:
        return is_builtin_name(self.name)

    def threshold(self, flag: AutomationFlag | str) -> float:
        """The threshold of ``flag`` (a flag or its name); an unknown name raises ValueError."""
        value: float = getattr(self, AutomationFlag(flag).value)
        return value

    def thresholds(self) -> dict[AutomationFlag, float]:
        """Every flag with its threshold, in the specification's order."""
        return {flag: self.threshold(flag) for flag in AutomationFlag}

    def proceeds(self, flag: AutomationFlag | str, confidence: float) -> bool:
        """Whether the task gated by ``flag`` proceeds automatically at ``confidence``.

        A threshold of 0.0 always proceeds and 1.0 never does (always manual, even at a
        confidence of exactly 1.0); otherwise the task proceeds when
        ``confidence >= threshold``. ``confidence`` must be in [0.0, 1.0].
        """
        value = _check_confidence(confidence)
        threshold = self.threshold(flag)
        if threshold <= ALWAYS_AUTOMATIC:
            return True
        if threshold >= ALWAYS_MANUAL:
            return False
        return value >= threshold

    def automatic_flags(self) -> tuple[AutomationFlag, ...]:
        """Flags whose threshold is 0.0 (always automatic)."""
        return tuple(f for f, t in self.thresholds().items() if t <= ALWAYS_AUTOMATIC)

    def manual_flags(self) -> tuple[AutomationFlag, ...]:
        """Flags whose threshold is 1.0 (always manual)."""
        return tuple(f for f, t in self.thresholds().items() if t >= ALWAYS_MANUAL)

    def confidence_flags(self) -> tuple[AutomationFlag, ...]:
        """Flags with an intermediate threshold (decided by the confidence)."""
        return tuple(
            f for f, t in self.thresholds().items() if ALWAYS_AUTOMATIC < t < ALWAYS_MANUAL
        )

    def check_guard(
        self,
        tool_name: str,
        is_write: bool,
        cost_so_far: float,
        calls_so_far: int,
        scope: GuardScope,
        *,
        is_apply: bool = False,
    ) -> GuardResult:
        """Gate one tool invocation with the profile's guards; no guards → allowed.

        See :meth:`AutomationGuard.check` for the order and the meaning of each argument.
        """
        if self.guards is None:
            return GuardResult.allow()
        return self.guards.check(
            tool_name, is_write, cost_so_far, calls_so_far, scope, is_apply=is_apply
        )
