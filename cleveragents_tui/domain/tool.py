"""Tool invocations and the side effects they declare."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cleveragents_tui.domain.ids import NamespacedName, Ulid, new_ulid
from cleveragents_tui.domain.text import RequiredText, Text
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
    ok: bool | None = None  # None: not run (recorded before the call) or not known
    output: Text | None = None


class ToolCategory(StrEnum):
    READ = "read"
    WRITE = "write"
    COMMAND = "command"
    DATABASE = "database"
    NETWORK = "network"
    VALIDATION = "validation"


class ToolSpec(BaseModel):
    """What a registered tool declares about itself.

    ``checkpointable``: its effects are captured by sandbox checkpoints. ``writes``: it
    changes a resource. ``irreversible``: its side effects leave the machine and cannot be
    rolled back. ``unsafe``: blocked unless the safety profile allows unsafe tools.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: NamespacedName
    category: ToolCategory
    description: str = ""
    checkpointable: bool = True
    writes: bool = False
    side_effects: tuple[RequiredText, ...] = ()
    irreversible: bool = False
    unsafe: bool = False

    @property
    def reads_only(self) -> bool:
        """A tool the read-only Strategize phase runs: it reads, and changes nothing."""
        return self.category is ToolCategory.READ and not (self.writes or self.irreversible)
