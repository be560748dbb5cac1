"""Custom automation profiles in the ``automation_profiles`` table.

A row holds the profile's name, its description and its whole definition as the model's
JSON. Reading validates the definition again: anything malformed becomes one
:class:`StoreCorruptedError` naming the row, never a traceback.
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.errors import ConcurrentChangeError, StoreCorruptedError
from cleveragents_tui.domain.profile import AutomationProfile
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store import mapping
from cleveragents_tui.store.tables import AutomationProfileRow, PlanRow

_TABLE = "automation_profiles"
_FIX = "the row was changed outside cleveragents; run `agents doctor` and restore it from a backup"
_TERMINAL = tuple(state.value for state in PlanState if state.is_terminal)


def profile_to_row(profile: AutomationProfile) -> AutomationProfileRow:
    return AutomationProfileRow(
        name=profile.name,
        description=profile.description or None,
        definition=mapping.dump_json(profile.model_dump(mode="json")),
        created_at=utc_now(),
    )


def profile_from_row(row: AutomationProfileRow) -> AutomationProfile:
    data = mapping.load_json(_TABLE, row.name, "definition", row.definition)
    if not isinstance(data, dict):
        raise StoreCorruptedError(
            f"{_TABLE} row {row.name}: column definition is not a JSON object", _FIX
        )
    profile = mapping.validated(
        _TABLE, row.name, lambda: AutomationProfile.model_validate(data), "definition"
    )
    if profile.name != row.name:
        raise StoreCorruptedError(
            f"{_TABLE} row {row.name}: the definition names another profile ({profile.name})",
            _FIX,
        )
    return profile


class AutomationProfileRepository:
    """Add, read, replace and remove custom profiles. Built-ins are never stored."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, profile: AutomationProfile) -> None:
        """Insert a new profile; a name someone else inserted meanwhile is refused."""
        self._session.add(profile_to_row(profile))
        try:
            self._session.flush()
        except IntegrityError as exc:  # the unit of work rolls the transaction back
            raise ConcurrentChangeError(
                f"automation profile {profile.name} was added by someone else meanwhile",
                "run the command again (with --replace to overwrite it)",
            ) from exc

    def replace(self, profile: AutomationProfile) -> None:
        """Overwrite the definition of an existing profile (its created_at is kept)."""
        row = self._session.get(AutomationProfileRow, profile.name)
        if row is None:
            self.add(profile)
            return
        fresh = profile_to_row(profile)
        row.description = fresh.description
        row.definition = fresh.definition
        self._session.flush()

    def get(self, name: str) -> AutomationProfile | None:
        row = self._session.get(AutomationProfileRow, name)
        return None if row is None else profile_from_row(row)

    def exists(self, name: str) -> bool:
        query = select(AutomationProfileRow.name).where(AutomationProfileRow.name == name)
        return self._session.scalar(query) is not None

    def names(self) -> list[str]:
        query = select(AutomationProfileRow.name).order_by(AutomationProfileRow.name)
        return list(self._session.scalars(query))

    def all(self) -> list[AutomationProfile]:
        """Every stored profile, by name."""
        rows = self._session.scalars(
            select(AutomationProfileRow).order_by(AutomationProfileRow.name)
        )
        return [profile_from_row(row) for row in rows]

    def remove(self, name: str) -> bool:
        """Delete the profile; False when there was none."""
        result = self._session.execute(
            delete(AutomationProfileRow).where(AutomationProfileRow.name == name)
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    def unfinished_plans_using(self, name: str) -> list[str]:
        """Ids of plans not yet applied or cancelled whose profile is ``name``."""
        query = (
            select(PlanRow.plan_id)
            .where(PlanRow.automation_profile == name, PlanRow.state.not_in(_TERMINAL))
            .order_by(PlanRow.plan_id)
        )
        return list(self._session.scalars(query))
