"""Tool invocations and the side effects they declare."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cleveragents_tui.domain.ids import Ulid, new_ulid
from cleveragents_tui.domain.text import RequiredText
from cleveragents_tui.domain.timeutil import UtcDatetime, utc_now


class ToolInvocation(BaseModel):
    """One call of a tool under a decision.

    ``side_effects`` are the tool's declared effects (``writes:files``,
    ``external:deployment``, ...); ``irreversible`` marks effects a rollback cannot undo.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    invocation_id: Ulid = Field(default_factory=new_ulid)
    plan_id: Ulid
    decision_id: Ulid
    tool: RequiredText
    arguments: dict[str, Any] = Field(default_factory=dict)
    side_effects: tuple[RequiredText, ...] = ()
    irreversible: bool = False
    created_at: UtcDatetime = Field(default_factory=utc_now)
