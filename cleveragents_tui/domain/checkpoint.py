"""Checkpoints: per-resource snapshots, grouped by the Execute decision they belong to."""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cleveragents_tui.domain.enums import (
    CheckpointGroupStatus,
    CheckpointType,
    SandboxStrategyName,
)
from cleveragents_tui.domain.ids import NamespacedName, Ulid, new_ulid
from cleveragents_tui.domain.text import RequiredText
from cleveragents_tui.domain.timeutil import UtcDatetime, utc_now


class CheckpointGroup(BaseModel):
    """All checkpoints taken for one decision; created ``pending``, flipped to ``committed``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group_id: Ulid = Field(default_factory=new_ulid)
    plan_id: Ulid
    decision_id: Ulid | None = None
    status: CheckpointGroupStatus = CheckpointGroupStatus.PENDING
    created_at: UtcDatetime = Field(default_factory=utc_now)


class CheckpointMetadata(BaseModel):
    """One resource's checkpoint: a commit SHA, an archive manifest, a layer, a savepoint.

    ``decision_point`` and ``non_rollbackable`` checkpoints belong to a decision (the group
    key); ``pre_write`` checkpoints are taken before writes and belong to none. A checkpoint
    removed by the budget keeps its row with ``pruned_at`` set.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpoint_id: Ulid = Field(default_factory=new_ulid)
    plan_id: Ulid
    group_id: Ulid | None = None
    decision_id: Ulid | None = None
    resource_id: NamespacedName
    checkpoint_type: CheckpointType
    strategy: SandboxStrategyName
    ref: RequiredText
    created_at: UtcDatetime = Field(default_factory=utc_now)
    pruned_at: UtcDatetime | None = None

    @property
    def rollbackable(self) -> bool:
        """Can the resource be rolled back to this checkpoint (not a marker, not pruned)?"""
        return (
            self.checkpoint_type is not CheckpointType.NON_ROLLBACKABLE and self.pruned_at is None
        )

    @model_validator(mode="after")
    def _check_rules(self) -> Self:
        if self.checkpoint_type is CheckpointType.PRE_WRITE:
            if self.decision_id is not None:
                raise ValueError("a pre_write checkpoint belongs to no decision")
        elif self.decision_id is None:
            raise ValueError(f"a {self.checkpoint_type} checkpoint needs its decision_id")
        none_strategy = self.strategy is SandboxStrategyName.NONE
        if none_strategy != (self.checkpoint_type is CheckpointType.NON_ROLLBACKABLE):
            raise ValueError(
                "non_rollbackable checkpoints are exactly those of resources with strategy none"
            )
        return self
