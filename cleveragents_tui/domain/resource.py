"""Resources: the real things a plan changes (a git repository, a directory, a database)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

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

    @property
    def path(self) -> Path | None:
        """``location`` as a path; None for a URL (a PostgreSQL database, an API)."""
        return None if "://" in self.location else Path(self.location)

    @property
    def shown_location(self) -> str:
        """``location`` as it is shown: a URL's password (an older version stored it; now
        refused) as ``***``, for everyone who reads this database, in a browser too."""
        return without_password(self.location)


def without_password(location: str) -> str:
    """``location`` with a URL's password replaced by ``***`` (a path as it is)."""
    if "://" not in location:
        return location
    try:
        parts = urlsplit(location)
        hidden = parts.password is not None
    except ValueError:  # a malformed port or address: shown as the user gave it, but no secret
        return location.split("://", 1)[0] + "://***"
    if not hidden:
        return location
    user, _, host = parts.netloc.rpartition("@")
    name = user.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{name}:***@{host}"))
