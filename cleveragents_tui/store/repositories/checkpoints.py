"""Checkpoint groups and the per-resource checkpoints in them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    bindparam,
    func,
    select,
    tuple_,
    union,
    update,
)
from sqlalchemy.orm import aliased

from cleveragents_tui.domain.checkpoint import CheckpointGroup, CheckpointMetadata
from cleveragents_tui.domain.enums import CheckpointGroupStatus, CheckpointType
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store import mapping
from cleveragents_tui.store.correction_queries import among, strings
from cleveragents_tui.store.driver_reads import AnySelect, fetch
from cleveragents_tui.store.repositories.base import Repository
from cleveragents_tui.store.tables import (
    CheckpointGroupRow,
    CheckpointMetadataRow,
    DecisionRow,
    ResourceRow,
)


def first_of_each_resource(plan: Any) -> ColumnElement[bool]:
    """Of the checkpoints of ``plan`` (a value or an expression), each resource's first:
    its baseline, or for a ``none`` resource the mark that the plan wrote it. With a
    checkpoint group at every Execute decision a plan's rows grow with its decisions, but a
    rollback's targets need only these and the restore point's group (issue 22).

    Found from each registered resource (few; every checkpoint names one) by two seeks of
    the (plan, resource, time) index: its earliest time, then the rows at it. Grouping the
    plan's rows by resource instead read all of them: 2 ms at 10,000 groups on SQLite."""
    other = aliased(CheckpointMetadataRow)
    earliest = (
        select(func.min(other.created_at))
        .where(other.plan_id == plan, other.resource_id == ResourceRow.resource_id)
        .scalar_subquery()
    )
    firsts = select(ResourceRow.resource_id, earliest)
    return tuple_(CheckpointMetadataRow.resource_id, CheckpointMetadataRow.created_at).in_(firsts)


def resources_checkpointed_in(plan: Any, *, decision_groups_only: bool) -> Select[str]:
    """The resources with checkpoint rows in ``plan`` (a value or an expression), only
    those of decision groups (not ``pre_write``) if asked. Asked of each registered
    resource (few) by a seek of the (plan, resource, time) index: a DISTINCT over the
    plan's rows read every one of them, and a plan holds a group at each Execute decision."""
    row = CheckpointMetadataRow
    has = select(row.checkpoint_id).where(
        row.plan_id == plan, row.resource_id == ResourceRow.resource_id
    )
    if decision_groups_only:
        has = has.where(row.checkpoint_type != CheckpointType.PRE_WRITE.value)
    return select(ResourceRow.resource_id).where(has.exists())


@cache
def _basis(dialect: str) -> AnySelect:
    """:meth:`CheckpointRepository.basis`'s statement, built once per dialect (building it
    cost more than running it) and run on the driver's cursor (store/driver_reads.py: a
    correction's execute reads it two or three times). A UNION, each part by its own index:
    with an OR, or with the plan in the second part, SQLite chose the plan's index and read
    every row of the plan (10 ms at 10,000 groups), so the decisions' rows are checked for
    the plan by the caller."""
    row = CheckpointMetadataRow
    plan: BindParameter[str] = bindparam("plan")  # typed by the columns it is compared with
    both = union(
        select(row.__table__).where(row.plan_id == plan, first_of_each_resource(plan)),
        select(row.__table__).where(among(dialect, row.decision_id, "ids")),
    ).subquery()
    return select(both).order_by(both.c.created_at, both.c.checkpoint_id)


class CheckpointRepository(Repository):
    """Checkpoint groups and per-resource checkpoints, as recovery and the readers see them.

    The recorder writes groups itself (``store/recording.py``): inserted ``pending`` with the
    refs made for them, so recovery can undo those refs, and flipped to ``committed`` in the
    transaction that inserts their decision.
    """

    def add(self, checkpoint: CheckpointMetadata) -> None:
        self._session.add(mapping.checkpoint_to_row(checkpoint))

    def delete_pending_group(self, group_id: str) -> None:
        self._session.delete(self._pending_row(group_id))

    def _pending_row(self, group_id: str) -> CheckpointGroupRow:
        row = self._session.get(CheckpointGroupRow, group_id)
        if row is None or row.status != CheckpointGroupStatus.PENDING.value:
            raise NotFoundError(f"no pending checkpoint group {group_id}")
        return row

    def pending_groups(self) -> list[tuple[CheckpointGroup, list[tuple[str, str]]]]:
        rows = self._session.scalars(
            select(CheckpointGroupRow)
            .where(CheckpointGroupRow.status == CheckpointGroupStatus.PENDING.value)
            .order_by(CheckpointGroupRow.created_at)
        )
        out = []
        for row in rows:
            refs = mapping.load_json(
                "checkpoint_groups", row.group_id, "pending_refs", row.pending_refs
            )
            out.append((mapping.group_from_row(row), [(str(r), str(f)) for r, f in refs]))
        return out

    def for_decision(self, decision_id: str) -> list[CheckpointMetadata]:
        return self._list(
            select(CheckpointMetadataRow)
            .where(CheckpointMetadataRow.decision_id == decision_id)
            .order_by(CheckpointMetadataRow.resource_id),
            mapping.checkpoint_from_row,
        )

    def for_plan(self, plan_id: str, resource_id: str | None = None) -> list[CheckpointMetadata]:
        """A plan's checkpoints (optionally one resource's), oldest first."""
        query = select(CheckpointMetadataRow).where(CheckpointMetadataRow.plan_id == plan_id)
        if resource_id is not None:
            query = query.where(CheckpointMetadataRow.resource_id == resource_id)
        return self._list(
            query.order_by(CheckpointMetadataRow.created_at, CheckpointMetadataRow.checkpoint_id),
            mapping.checkpoint_from_row,
        )

    def latest_of_type(
        self, plan_id: str, resource_id: str, checkpoint_type: CheckpointType
    ) -> CheckpointMetadata | None:
        """The resource's latest checkpoint of this type in the plan, pruned or not: from the
        (plan, resource, time) index, not every checkpoint the plan took."""
        c = CheckpointMetadataRow
        query = (
            select(c)
            .where(
                c.plan_id == plan_id,
                c.resource_id == resource_id,
                c.checkpoint_type == checkpoint_type.value,
            )
            .order_by(c.created_at.desc(), c.checkpoint_id.desc())
            .limit(1)
        )
        rows = self._list(query, mapping.checkpoint_from_row)
        return rows[0] if rows else None

    def superseded_live(self, plan_id: str, before: datetime) -> list[CheckpointMetadata]:
        """The plan's live decision-point checkpoints taken before ``before`` by decisions
        since superseded, oldest first: what ``agents gc`` may drop but for the restore points
        it keeps. The database passes over the plan's checkpoint rows (SQLite prefers the
        plan index to the live partial one); only the matching rows are read into objects."""
        c, d = CheckpointMetadataRow, DecisionRow
        query = (
            select(c)
            .join(d, d.decision_id == c.decision_id)
            .where(
                c.plan_id == plan_id,
                c.pruned_at.is_(None),
                c.checkpoint_type == CheckpointType.DECISION_POINT.value,
                c.created_at < before,
                d.superseded_by.is_not(None),
            )
            .order_by(c.created_at, c.checkpoint_id)
        )
        return self._list(query, mapping.checkpoint_from_row)

    def basis(self, plan_id: str, *decision_ids: str) -> list[CheckpointMetadata]:
        """What a rollback or a diff reads of a plan's checkpoints, oldest first: each
        resource's first (:func:`first_of_each_resource`) and every one of ``decision_ids``.
        As :meth:`for_plan` for :func:`engine.core.rollback.targets_from` and the diff's
        points, without reading every checkpoint the plan ever took."""
        statement = _basis(self._session.get_bind().dialect.name)
        ids = strings(self._session, decision_ids)
        found = fetch(self._session, statement, plan=plan_id, ids=ids)
        return [mapping.checkpoint_from_row(c) for c in found if c.plan_id == plan_id]

    def resources_checkpointed(self, plan_id: str, *, decision_groups_only: bool) -> set[str]:
        """The resources with checkpoint rows in the plan (only in decision groups, if asked)."""
        query = resources_checkpointed_in(plan_id, decision_groups_only=decision_groups_only)
        return set(self._session.scalars(query))

    def mark_pruned(self, checkpoint_ids: Sequence[str]) -> None:
        if checkpoint_ids:
            self._session.execute(
                update(CheckpointMetadataRow)
                .where(CheckpointMetadataRow.checkpoint_id.in_(list(checkpoint_ids)))
                .values(pruned_at=utc_now())
            )

    def decisions_with_checkpoints(self, plan_id: str) -> frozenset[str]:
        """The decisions with a committed checkpoint group (the tree's ⚑), the first Execute
        decision's too: its group holds no checkpoint (nothing was written before it), and a
        revert of it goes back to where each resource began."""
        group = CheckpointGroupRow
        rows = self._session.scalars(
            select(group.decision_id).where(
                group.plan_id == plan_id,
                group.decision_id.is_not(None),
                group.status == CheckpointGroupStatus.COMMITTED.value,
            )
        )
        return frozenset(r for r in rows if r is not None)

    def count_for_plan(self, plan_id: str) -> int:
        return int(
            self._session.scalar(
                select(func.count())
                .select_from(CheckpointMetadataRow)
                .where(CheckpointMetadataRow.plan_id == plan_id)
            )
            or 0
        )

    def group_of(self, plan_id: str, decision_id: str) -> CheckpointGroup | None:
        """The decision's first checkpoint group (the one ``plan explain`` and the app's
        details show), from the decision index, not every group of the plan."""
        rows = self._list(
            select(CheckpointGroupRow)
            .where(
                CheckpointGroupRow.plan_id == plan_id,
                CheckpointGroupRow.decision_id == decision_id,
            )
            .order_by(CheckpointGroupRow.created_at)
            .limit(1),
            mapping.group_from_row,
        )
        return rows[0] if rows else None
