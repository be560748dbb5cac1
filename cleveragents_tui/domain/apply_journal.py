"""The apply journal's entries: how far an Apply got on each resource (docs/reliability.md).

An Apply lands several resources one after the other; a crash can stop it between any two
steps. Each entry is written before the step it names, so a rerun knows which resources
landed (skip them), which were landing (land again: every strategy's apply is idempotent
and recognises the plan's own landed content) and which were only planned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class ApplyStepState(StrEnum):
    PLANNED = "planned"
    LANDING = "landing"
    LANDED = "landed"


@dataclass(frozen=True, slots=True)
class ApplyStep:
    """One resource of one Apply (a plan's attempt); ``landed`` says what landing left on the
    real resource: ``summary``, and per strategy ``branch``/``commit``, ``files`` (path →
    SHA-256, None for a path removed) or ``database`` (``committed``)."""

    plan_id: str
    attempt: int
    resource_id: str
    position: int
    strategy: str
    state: ApplyStepState
    landed: dict[str, Any] = field(default_factory=dict)
