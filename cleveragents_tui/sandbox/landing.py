"""What landing a database copy in its target reports (``sqlite_land``, ``postgres_copy.land``):
the rows written, or the conflict that left the target as it was."""

from __future__ import annotations

from dataclasses import dataclass


class LandConflictError(Exception):
    """The target changed where the plan changed it, or cannot take the change."""


@dataclass(frozen=True, slots=True)
class Landed:
    """What ``land`` did: rows written, or that the target already held the result."""

    rows: int
    already: bool
