from __future__ import annotations

from typing import TypedDict

import pytest

from cleveragents_tui.automation.limits import (
    PlanUsage,
    check_actor_limits,
    check_plan_limits,
    validation_retry_allowed,
)
from cleveragents_tui.domain.limits import ActorLimits, OnExceed, PlanLimits


class ActorUsage(TypedDict, total=False):
    """What ``check_actor_limits`` is told was used (its keyword arguments but ``on_exceed``)."""

    tool_calls_this_invocation: int
    retries_of_this_tool: int
    tokens_this_call: int


def test_no_limits_means_no_breach() -> None:
    assert (
        check_plan_limits(
            PlanLimits(),
            PlanUsage(tokens=10**9, cost_usd=1e6, wall_clock_seconds=1e9, tool_invocations=10**6),
        )
        is None
    )


@pytest.mark.parametrize(
    ("limits", "usage", "name"),
    [
        (PlanLimits(max_tokens=100), PlanUsage(tokens=101), "max_tokens"),
        (PlanLimits(max_cost_usd=1.0), PlanUsage(cost_usd=1.01), "max_cost_usd"),
        (
            PlanLimits(max_wall_clock_seconds=60),
            PlanUsage(wall_clock_seconds=61),
            "max_wall_clock_seconds",
        ),
        (PlanLimits(max_tool_invocations=5), PlanUsage(tool_invocations=6), "max_tool_invocations"),
    ],
)
def test_each_plan_limit_is_enforced_only_past_it(
    limits: PlanLimits, usage: PlanUsage, name: str
) -> None:
    breach = check_plan_limits(limits, usage)
    assert breach is not None and breach.limit == name and breach.action is OnExceed.PAUSE
    at_limit = {
        k: getattr(limits, k)
        for k in ("max_tokens", "max_cost_usd", "max_wall_clock_seconds", "max_tool_invocations")
        if getattr(limits, k) is not None
    }
    exactly = PlanUsage(
        **{
            {
                "max_tokens": "tokens",
                "max_cost_usd": "cost_usd",
                "max_wall_clock_seconds": "wall_clock_seconds",
                "max_tool_invocations": "tool_invocations",
            }[k]: v
            for k, v in at_limit.items()
        }
    )
    assert check_plan_limits(limits, exactly) is None


def test_terminate_is_carried_in_the_breach() -> None:
    breach = check_plan_limits(PlanLimits(max_tokens=1, on_exceed="terminate"), PlanUsage(tokens=2))
    assert breach is not None and breach.action is OnExceed.TERMINATE
    assert breach.message == "max_tokens exceeded: used 2 of 1"


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"tool_calls_this_invocation": 11}, "max_tool_calls_per_invocation"),
        ({"retries_of_this_tool": 4}, "max_retries_per_tool"),
        ({"tokens_this_call": 4097}, "max_tokens_per_call"),
    ],
)
def test_actor_limits(kwargs: ActorUsage, name: str) -> None:
    limits = ActorLimits(
        max_tool_calls_per_invocation=10, max_retries_per_tool=3, max_tokens_per_call=4096
    )
    breach = check_actor_limits(limits, **kwargs)
    assert breach is not None and breach.limit == name
    assert (
        check_actor_limits(
            limits, tool_calls_this_invocation=10, retries_of_this_tool=3, tokens_this_call=4096
        )
        is None
    )


def test_validation_retries_default_to_three() -> None:
    limits = PlanLimits()
    assert [validation_retry_allowed(limits, n) for n in range(5)] == [
        True,
        True,
        True,
        False,
        False,
    ]
