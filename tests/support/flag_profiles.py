"""Custom automation profiles for the run-time guardrail tests: a built-in profile with some
thresholds and safety settings changed, registered under a ``local/`` name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.profile import AutomationProfile
from cleveragents_tui.store.store import Store


def register_profile(
    store: Store,
    name: str,
    *,
    base: str = "ci",
    safety: Mapping[str, Any] | None = None,
    thresholds: Mapping[str, float] | None = None,
) -> AutomationProfile:
    """Register ``local/<name>``: ``base`` with ``thresholds`` and ``safety`` changed."""
    builtin = ProfileRegistry.builtins()[base]
    data = builtin.model_dump(mode="python")
    data.update(name=f"local/{name}", description=f"{base} with {thresholds}", **(thresholds or {}))
    data["safety"] = {**data["safety"], **(safety or {})}
    profile = AutomationProfile.model_validate(data)
    ProfileRegistry(store).add(profile)
    return profile
