"""The outcome of rolling resources back to a decision: per resource, what happened."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict


class ResourceOutcome(StrEnum):
    ROLLED_BACK = "rolled_back"
    FAILED = "failed"
    RESTORED = "restored"
    UNTOUCHED = "untouched"
    NOT_ROLLBACKABLE = "not_rollbackable"
    RECREATED = "recreated"


class ResourceRollback(BaseModel):
    """One resource: its outcome, the checkpoint it went to, and the safety checkpoint of
    the state it was in before (kept, so the old attempt can still be diffed).

    ``rolled_back``: now at the target. ``failed``: its rollback (or its restore) failed.
    ``restored``: rolled back, then put back as it was because another resource failed.
    ``untouched``: never reached because an earlier resource failed. ``not_rollbackable``:
    a resource with sandbox strategy none. ``recreated``: a sandbox without checkpoints
    (checkpointing off), discarded and made anew from the real resource; its ``target_ref``
    is a checkpoint of the new sandbox as it was made, and ``old_files`` what the old one
    had changed (engine/core/replay_snapshots.py, for the correction's diff: nothing else keeps it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource_id: str
    outcome: ResourceOutcome
    target_ref: str | None = None
    safety_ref: str | None = None
    detail: str | None = None
    old_files: tuple[dict[str, Any], ...] | None = None


class RollbackReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    decision_id: str
    resources: tuple[ResourceRollback, ...]

    @property
    def succeeded(self) -> bool:
        ok = (
            ResourceOutcome.ROLLED_BACK,
            ResourceOutcome.RECREATED,
            ResourceOutcome.NOT_ROLLBACKABLE,
        )
        return all(r.outcome in ok for r in self.resources)

    def outcome_of(self, resource_id: str) -> ResourceOutcome:
        return next(r.outcome for r in self.resources if r.resource_id == resource_id)
