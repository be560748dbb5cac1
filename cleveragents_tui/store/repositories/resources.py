"""The registered resources (repositories, folders, databases) plans work on."""

from __future__ import annotations

from sqlalchemy import func, select

from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store import mapping
from cleveragents_tui.store.repositories.base import Repository
from cleveragents_tui.store.tables import (
    ApplyJournalRow,
    CheckpointMetadataRow,
    PlanActionRow,
    PlanRow,
    ResourceRow,
)


class ResourceRepository(Repository):
    def add(self, resource: Resource) -> None:
        self._session.add(mapping.resource_to_row(resource))

    def get(self, resource_id: str) -> Resource:
        row = self._get(ResourceRow, resource_id, "resource")
        return mapping.resource_from_row(row)

    def all(self) -> list[Resource]:
        """Every resource, removed ones too: plans that used them still name them."""
        return self._list(select(ResourceRow), mapping.resource_from_row)

    def registered(self) -> list[Resource]:
        """The resources new plans may use (not removed), by name."""
        return self._list(
            select(ResourceRow)
            .where(ResourceRow.removed_at.is_(None))
            .order_by(ResourceRow.resource_id),
            mapping.resource_from_row,
        )

    def is_removed(self, resource_id: str) -> bool:
        row = self._session.get(ResourceRow, resource_id)
        return row is not None and row.removed_at is not None

    def set_checkpoints(
        self, resource_id: str, *, enabled: bool | None = None, max_per_plan: int | None = None
    ) -> None:
        row = self._get(ResourceRow, resource_id, "resource")
        if enabled is not None:
            row.checkpoint_enabled = enabled
        if max_per_plan is not None:
            row.checkpoint_max_per_plan = max_per_plan

    def plans_using(self, resource_id: str) -> list[tuple[str, PlanState]]:
        """(plan id, state) of every plan whose stored action names the resource."""
        needle = mapping.dump_json(resource_id)
        rows = self._session.execute(
            select(PlanRow.plan_id, PlanRow.state, PlanActionRow.definition)
            .join(PlanActionRow, PlanActionRow.plan_id == PlanRow.plan_id)
            .where(PlanActionRow.definition.contains(needle, autoescape=True))
            .order_by(PlanRow.created_at, PlanRow.plan_id)
        )
        found = []
        for plan_id, state, definition in rows:
            action = mapping.load_json("plan_actions", plan_id, "definition", definition)
            if resource_id in _named_resources(action):
                found.append((plan_id, PlanState(state)))
        return found

    def remove(self, resource_id: str) -> bool:
        """Delete the resource if nothing refers to it (True); else mark it removed (False),
        so the plans, checkpoints and Apply journals that name it keep working."""
        row = self._get(ResourceRow, resource_id, "resource")
        referenced = (
            self._session.scalar(
                select(func.count())
                .select_from(CheckpointMetadataRow)
                .where(CheckpointMetadataRow.resource_id == resource_id)
            )
            or self._session.scalar(
                select(func.count())
                .select_from(ApplyJournalRow)
                .where(ApplyJournalRow.resource_id == resource_id)
            )
            or self.plans_using(resource_id)
        )
        if referenced:
            row.removed_at = utc_now()
            return False
        self._session.delete(row)
        return True


def _named_resources(action: object) -> set[str]:
    """The resources a stored action names, its subactions' (child plans to come) included."""
    if not isinstance(action, dict):
        return set()
    named = {r for r in action.get("resources") or () if isinstance(r, str)}
    for sub in action.get("subactions") or ():
        named |= _named_resources(sub)
    return named
