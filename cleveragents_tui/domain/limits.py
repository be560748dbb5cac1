"""Runtime limits of a plan and of its actors (behaviour spec, "Cost and Rate Limits")."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_VALIDATION_RETRIES = 3


class OnExceed(StrEnum):
    PAUSE = "pause"  # the plan pauses and asks for approval to continue
    TERMINATE = "terminate"  # the plan is cancelled


class ActorLimits(BaseModel):
    """Per actor invocation: stops an actor looping. ``None`` means no limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tool_calls_per_invocation: int | None = Field(default=None, ge=0)
    max_retries_per_tool: int | None = Field(default=None, ge=0, le=100)
    max_tokens_per_call: int | None = Field(default=None, ge=0)


class PlanLimits(BaseModel):
    """Per plan: budgets that pause or terminate the plan when exceeded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: int | None = Field(default=None, ge=0)
    max_cost_usd: float | None = Field(default=None, ge=0.0)
    max_wall_clock_seconds: float | None = Field(default=None, gt=0.0)
    max_tool_invocations: int | None = Field(default=None, ge=0)
    validation_retry_limit: int = Field(default=DEFAULT_VALIDATION_RETRIES, ge=0, le=100)
    on_exceed: OnExceed = OnExceed.PAUSE
    actor: ActorLimits = ActorLimits()
