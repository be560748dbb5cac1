"""Runtime limits of a plan and of its actors (behaviour spec, "Cost and Rate Limits").

Every figure is strict: a number of the right kind, 0 or more (``true`` or ``"12"`` in an
action file is refused at pre-flight, not read as 1 or 12). engine/run/policing.py acts on them.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt

DEFAULT_VALIDATION_RETRIES = 3


class OnExceed(StrEnum):
    PAUSE = "pause"  # the plan pauses and asks for approval to continue
    TERMINATE = "terminate"  # the plan ends errored, never applied


Count = Annotated[StrictInt, Field(ge=0)]
Amount = Annotated[StrictInt | StrictFloat, Field(ge=0, allow_inf_nan=False)]


class ActorLimits(BaseModel):
    """Per actor invocation: stops an actor looping. ``None`` means no limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tool_calls_per_invocation: Count | None = None
    max_retries_per_tool: Count | None = Field(default=None, le=100)
    max_tokens_per_call: Count | None = None


class PlanLimits(BaseModel):
    """Per plan: budgets that pause or terminate the plan when exceeded."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tokens: Count | None = None
    max_cost_usd: Amount | None = None
    max_wall_clock_seconds: Amount | None = Field(default=None, gt=0)
    max_tool_invocations: Count | None = None
    validation_retry_limit: Count = Field(default=DEFAULT_VALIDATION_RETRIES, le=100)
    on_exceed: OnExceed = OnExceed.PAUSE
    actor: ActorLimits = ActorLimits()
