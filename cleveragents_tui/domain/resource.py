"""Resources: the real things a plan changes (a git repository, a directory, a database)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.ids import NamespacedName
from cleveragents_tui.domain.text import RequiredText
from cleveragents_tui.domain.timeutil import UtcDatetime, utc_now

DEFAULT_CHECKPOINT_BUDGET = 50


class Resource(BaseModel):
    """A named resource with its sandbox strategy and checkpoint settings.

    ``kind`` says what it is (``git``, ``filesystem``, ``database``, ``external``, ...);
    ``location`` is a path or a URL. ``checkpoint_max_per_plan`` is
    ``sandbox.checkpoint.max-per-plan`` (default 50).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    resource_id: NamespacedName
    kind: RequiredText
    location: RequiredText
    sandbox_strategy: SandboxStrategyName
    checkpoint_enabled: bool = True
    checkpoint_max_per_plan: int = Field(default=DEFAULT_CHECKPOINT_BUDGET, ge=2, le=10_000)
    created_at: UtcDatetime = Field(default_factory=utc_now)

    @property
    def rollbackable(self) -> bool:
        return self.checkpoint_enabled and self.sandbox_strategy.rollbackable
