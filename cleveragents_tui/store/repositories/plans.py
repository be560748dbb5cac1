"""Plans and the action definition each was created from."""

from __future__ import annotations

from sqlalchemy import bindparam, literal_column, select, update
from sqlalchemy.orm.util import identity_key

from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.errors import ConcurrentChangeError, NotFoundError, StoreCorruptedError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store import mapping
from cleveragents_tui.store.driver_reads import fetch
from cleveragents_tui.store.repositories.base import Repository, resolve_id
from cleveragents_tui.store.session_writes import locking, write
from cleveragents_tui.store.tables import PlanActionRow, PlanRow

_LIST_PLANS = "list plans with `agents plan list`"
# Built once, sent on the driver's cursor (store/driver_reads.py, store/session_writes.py):
# every run step and correction reads and saves its plan, and the ORM's UPDATE cost ~1 ms
# of Python against its SQL's few tens of microseconds (issue 22).
_ONE = select(PlanRow.__table__).where(PlanRow.plan_id == bindparam("id"))
# FOR UPDATE NOWAIT on PostgreSQL; SQLite's compiler leaves it out (its write transaction,
# BEGIN IMMEDIATE, already excludes every other writer)
_LOCK = _ONE.with_for_update(nowait=True)
_ACTION = select(PlanActionRow.definition, PlanActionRow.sandbox_plan_id).where(
    PlanActionRow.plan_id == bindparam("id")
)
_PLANS = PlanRow.__table__
_BELOW = (
    select(_PLANS.c.plan_id, literal_column("1").label("depth"))
    .where(_PLANS.c.parent_plan_id == bindparam("id"))
    .cte("below", recursive=True)
)
_BELOW = _BELOW.union_all(
    select(_PLANS.c.plan_id, _BELOW.c.depth + 1).where(_PLANS.c.parent_plan_id == _BELOW.c.plan_id)
)
_DESCENDANTS = (
    select(_PLANS)
    .join(_BELOW, _PLANS.c.plan_id == _BELOW.c.plan_id)
    .order_by(_BELOW.c.depth, _PLANS.c.created_at, _PLANS.c.plan_id)
)
_SAVE = (
    update(PlanRow)
    .where(PlanRow.plan_id == bindparam("id"), PlanRow.version == bindparam("read"))
    .values(
        phase=bindparam("phase"),
        state=bindparam("state"),
        attempt=bindparam("attempt"),
        automation_profile=bindparam("profile"),
        title=bindparam("title"),
        updated_at=bindparam("updated_at"),
        version=bindparam("version"),
    )
)


class PlanRepository(Repository):
    def add(self, plan: Plan) -> None:
        self._session.add(mapping.plan_to_row(plan))

    def resolve(self, ref: str) -> str:
        return resolve_id(self._session, PlanRow.plan_id, ref, "plan", _LIST_PLANS)

    def get(self, plan_id: str) -> Plan:
        """The plan as stored (a row read on the driver's cursor: store/driver_reads.py; as
        the ORM's ``get`` read it, with autoflush off, a plan added and not flushed is not
        found; a plan is never changed through the ORM's rows)."""
        rows = fetch(self._session, _ONE, id=plan_id)
        if not rows:
            raise NotFoundError(f"plan {plan_id} does not exist", _LIST_PLANS)
        return mapping.plan_from_row(rows[0])

    def all(self) -> list[Plan]:
        return self._list(
            select(PlanRow).order_by(PlanRow.created_at, PlanRow.plan_id), mapping.plan_from_row
        )

    def in_state(self, state: PlanState) -> list[Plan]:
        """The plans in ``state``, oldest first."""
        return self._list(
            select(PlanRow)
            .where(PlanRow.state == state.value)
            .order_by(PlanRow.created_at, PlanRow.plan_id),
            mapping.plan_from_row,
        )

    def states_for_project(self, project: str) -> dict[str, int]:
        return self._count_by(PlanRow.state, PlanRow.project == project)

    def children(self, plan_id: str) -> list[Plan]:
        return self._list(
            select(PlanRow).where(PlanRow.parent_plan_id == plan_id).order_by(PlanRow.created_at),
            mapping.plan_from_row,
        )

    def descendants(self, plan_id: str) -> list[Plan]:
        """The plan's children, theirs, and so on, in one statement: each plan before its
        own children (a read per plan cost a pause of a plan of ten children 3 ms)."""
        return [
            mapping.plan_from_row(row) for row in fetch(self._session, _DESCENDANTS, id=plan_id)
        ]

    def lock(self, plan_id: str) -> Plan:
        """Read the plan and hold it for this transaction: PostgreSQL locks the row (NOWAIT:
        a plan someone else holds fails at once as busy); SQLite's write transaction (BEGIN
        IMMEDIATE) already excludes every other writer."""
        rows = locking(self._session, _LOCK, {"id": plan_id})
        row = rows[0] if rows else None
        if row is None:
            raise NotFoundError(f"plan {plan_id} does not exist", _LIST_PLANS)
        return mapping.plan_from_row(row)

    def save(self, plan: Plan) -> Plan:
        """Write the plan's mutable fields if nobody else changed it since it was read.

        Returns the plan with its version bumped; raises ConcurrentChangeError otherwise.
        """
        changed = write(
            self._session,
            _SAVE,
            {
                "id": plan.plan_id,
                "read": plan.version,
                "phase": Phase(plan.phase).value,  # model_copy does not validate: accept str too
                "state": PlanState(plan.state).value,
                "attempt": plan.attempt,
                "profile": plan.automation_profile,
                "title": plan.title,
                "updated_at": plan.updated_at,
                "version": plan.version + 1,
            },
        )
        # a row this session holds is read again at its next use (the ORM's UPDATE kept it
        # in step; this one does not touch the session)
        held = self._session.identity_map.get(identity_key(PlanRow, plan.plan_id))
        if held is not None:
            self._session.expire(held)
        if changed != 1:
            raise ConcurrentChangeError(
                f"plan {plan.plan_id} was changed by someone else", "reload it and try again"
            )
        return plan.model_copy(update={"version": plan.version + 1})


class PlanActionRepository(Repository):
    """The action definition each plan was created from."""

    def save(
        self, plan_id: str, definition: dict[str, object], sandbox_plan_id: str | None = None
    ) -> None:
        self._session.add(
            PlanActionRow(
                plan_id=plan_id,
                definition=mapping.dump_json(definition),
                sandbox_plan_id=sandbox_plan_id,
            )
        )

    def sandbox_plan(self, plan_id: str) -> str:
        """Whose sandboxes the plan works in: its own, or its host's."""
        rows = fetch(self._session, _ACTION, id=plan_id)  # as PlanRepository.get reads
        return plan_id if not rows or rows[0].sandbox_plan_id is None else rows[0].sandbox_plan_id

    def has(self, plan_id: str) -> bool:
        """Whether the plan has an action to run (a recorded sample, `agents demo-data`'s, has
        none: it is for browsing)."""
        return bool(self.having([plan_id]))

    def having(self, plan_ids: list[str]) -> set[str]:
        """Those of ``plan_ids`` that have an action to run, in one statement."""
        if not plan_ids:
            return set()
        query = select(PlanActionRow.plan_id).where(PlanActionRow.plan_id.in_(plan_ids))
        return set(self._session.scalars(query))

    def get(self, plan_id: str) -> dict[str, object]:
        rows = fetch(self._session, _ACTION, id=plan_id)
        row = rows[0] if rows else None
        if row is None:
            raise NotFoundError(
                f"plan {plan_id} has no stored action", "it was not created with `agents plan use`"
            )
        loaded = mapping.load_json("plan_actions", plan_id, "definition", row.definition)
        if not isinstance(loaded, dict):
            raise StoreCorruptedError(f"plan_actions row {plan_id}: definition is not an object")
        return loaded
