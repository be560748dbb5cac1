"""Checking usage against a plan's and its actors' limits.

The checks are pure: callers pass the usage they measured (wall-clock time included), so
the rules are testable without clocks. What happens on a breach — pause for approval or
terminate — is the plan's ``limits.on_exceed``; ``engine/run/policing.py`` measures the usage
of a running plan and carries it out.
"""

from __future__ import annotations

from dataclasses import dataclass

from cleveragents_tui.domain.limits import ActorLimits, OnExceed, PlanLimits


@dataclass(frozen=True)
class PlanUsage:
    tokens: int = 0
    cost_usd: float = 0.0
    wall_clock_seconds: float = 0.0
    tool_invocations: int = 0


@dataclass(frozen=True)
class LimitBreach:
    limit: str
    allowed: float
    used: float
    action: OnExceed

    @property
    def message(self) -> str:
        return f"{self.limit} exceeded: used {self.used:g} of {self.allowed:g}"


def check_plan_limits(limits: PlanLimits, usage: PlanUsage) -> LimitBreach | None:
    """The first limit the usage is over (``used > allowed``), in a fixed order."""
    for name, allowed, used in (
        ("max_tokens", limits.max_tokens, usage.tokens),
        ("max_cost_usd", limits.max_cost_usd, usage.cost_usd),
        ("max_wall_clock_seconds", limits.max_wall_clock_seconds, usage.wall_clock_seconds),
        ("max_tool_invocations", limits.max_tool_invocations, usage.tool_invocations),
    ):
        if allowed is not None and used > allowed:
            return LimitBreach(name, allowed, used, limits.on_exceed)
    return None


def check_actor_limits(
    limits: ActorLimits,
    *,
    tool_calls_this_invocation: int = 0,
    retries_of_this_tool: int = 0,
    tokens_this_call: int = 0,
    on_exceed: OnExceed = OnExceed.PAUSE,
) -> LimitBreach | None:
    for name, allowed, used in (
        (
            "max_tool_calls_per_invocation",
            limits.max_tool_calls_per_invocation,
            tool_calls_this_invocation,
        ),
        ("max_retries_per_tool", limits.max_retries_per_tool, retries_of_this_tool),
        ("max_tokens_per_call", limits.max_tokens_per_call, tokens_this_call),
    ):
        if allowed is not None and used > allowed:
            return LimitBreach(name, allowed, used, on_exceed)
    return None


def validation_retry_allowed(limits: PlanLimits, attempts_so_far: int) -> bool:
    """May the execution actor try to fix a failing validation once more?"""
    return attempts_so_far < limits.validation_retry_limit
