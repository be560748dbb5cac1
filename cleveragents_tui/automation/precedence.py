"""Which automation profile a plan gets: plan > action > project > global > default.

Resolved once, when the plan is created, and locked to it (behaviour spec, "Profile
Precedence"); child plans inherit their parent's locked profile.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

PROFILE_KEY = "core.automation-profile"
DEFAULT_PROFILE = "manual"  # the specification's default starting point
GLOBAL_SCOPE = "global"


def project_scope(project: str) -> str:
    return f"project:{project}"


class ProfileSource(StrEnum):
    PLAN = "plan"
    ACTION = "action"
    PROJECT = "project"
    GLOBAL = "global"
    DEFAULT = "default"
    PARENT = "parent"


@dataclass(frozen=True)
class ResolvedProfile:
    name: str
    source: ProfileSource


def resolve_profile(
    *,
    plan_override: str | None,
    action_profile: str | None,
    project_profile: str | None,
    global_profile: str | None,
) -> ResolvedProfile:
    for name, source in (
        (plan_override, ProfileSource.PLAN),
        (action_profile, ProfileSource.ACTION),
        (project_profile, ProfileSource.PROJECT),
        (global_profile, ProfileSource.GLOBAL),
    ):
        if name:
            return ResolvedProfile(name, source)
    return ResolvedProfile(DEFAULT_PROFILE, ProfileSource.DEFAULT)
