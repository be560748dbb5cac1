"""The statements of ``record_decision``, on the driver's connection (issue 22).

Recording runs once per decision, so it pays for every statement. Each statement is built
once, at import, compiled by SQLAlchemy once per dialect, and sent on the driver's cursor
(store/driver.py: SQLAlchemy's execution layer cost ~20 µs a statement, more than the
database); several rows of a table go in one executemany; nothing is read back before it
is changed; and every read is one an index answers in a few rows — nothing that grows with
the plan's size.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from enum import Enum
from functools import cache
from importlib import import_module
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    Engine,
    Insert,
    Integer,
    bindparam,
    func,
    insert,
    literal_column,
    select,
    union_all,
    update,
)
from sqlalchemy.sql.expression import Executable

from cleveragents_tui import failpoints
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import CheckpointGroupStatus, CheckpointType
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.store import mapping
from cleveragents_tui.store.driver import Driver, Values
from cleveragents_tui.store.repositories.checkpoints import resources_checkpointed_in
from cleveragents_tui.store.tables import (
    CheckpointGroupRow,
    CheckpointMetadataRow,
    ContextBlobRow,
    DecisionArtifactRow,
    DecisionDependencyRow,
    DecisionRow,
    EventRow,
)
from cleveragents_tui.store.usage_queries import kind_is

PENDING = CheckpointGroupStatus.PENDING.value
COMMITTED = CheckpointGroupStatus.COMMITTED.value
CHECKPOINTS = CheckpointMetadataRow.__table__

# The kind as a literal, not a bound value (store/usage_queries.py ``kind_is``): 5-6 µs warm,
# several times that as a recording's first statement (issue 22).
_WRITTEN = kind_is("resource_written")
_PARENT_PLAN = select(DecisionRow.plan_id).where(DecisionRow.decision_id == bindparam("parent"))
_NUMBER_AND_PARENT = select(
    select(func.max(DecisionRow.sequence_number))
    .where(DecisionRow.plan_id == bindparam("plan"))
    .scalar_subquery(),
    _PARENT_PLAN.scalar_subquery(),
)
# the same, and the plan's writes after event ``after`` (Execute: what its group checkpoints)
# in one statement: a row (0, number, parent's plan), then one (1, event id, payload) each
_NUMBER_AND_WRITES = union_all(
    select(
        literal_column("0", Integer),
        _NUMBER_AND_PARENT.selected_columns[0],
        _NUMBER_AND_PARENT.selected_columns[1],
    ),
    select(literal_column("1", Integer), EventRow.event_id, EventRow.payload).where(
        EventRow.plan_id == bindparam("plan"),
        _WRITTEN,
        EventRow.event_id > bindparam("after"),
    ),
)
_INSERT_DECISION = insert(DecisionRow)
_INSERT_EDGES = insert(DecisionDependencyRow)
_INSERT_ARTIFACTS = insert(DecisionArtifactRow)
_INSERT_GROUP = insert(CheckpointGroupRow)
_INSERT_CHECKPOINTS = insert(CheckpointMetadataRow)
_INSERT_EVENT = insert(EventRow)
_NOTE_REFS = (
    update(CheckpointGroupRow)
    .where(CheckpointGroupRow.group_id == bindparam("group"), CheckpointGroupRow.status == PENDING)
    .values(pending_refs=bindparam("refs"))
)
_COMMIT_GROUP = (
    update(CheckpointGroupRow)
    .where(CheckpointGroupRow.group_id == bindparam("group"), CheckpointGroupRow.status == PENDING)
    .values(status=COMMITTED, decision_id=bindparam("decision"), pending_refs="[]")
)
_LIVE_ROWS = (
    select(
        CheckpointMetadataRow.checkpoint_id,
        CheckpointMetadataRow.resource_id,
        CheckpointMetadataRow.checkpoint_type,
        CheckpointMetadataRow.ref,
    )
    .where(
        CheckpointMetadataRow.plan_id == bindparam("plan"),
        CheckpointMetadataRow.resource_id == bindparam("resource"),
        CheckpointMetadataRow.pruned_at.is_(None),
    )
    .order_by(CheckpointMetadataRow.created_at, CheckpointMetadataRow.checkpoint_id)
)
_COUNT_LIVE = (
    select(func.count())
    .select_from(CheckpointMetadataRow)
    .where(
        CheckpointMetadataRow.plan_id == bindparam("plan"),
        CheckpointMetadataRow.resource_id == bindparam("resource"),
        CheckpointMetadataRow.pruned_at.is_(None),
    )
)
_MARK_PRUNED = (
    update(CheckpointMetadataRow)
    .where(CheckpointMetadataRow.checkpoint_id == bindparam("id"))
    .values(pruned_at=bindparam("now"))
)
_WRITTEN_SINCE = (
    select(EventRow.event_id, EventRow.payload)
    .where(
        EventRow.plan_id == bindparam("plan"),
        _WRITTEN,
        EventRow.event_id > bindparam("after"),
    )
    .order_by(EventRow.event_id)
)
_CHECKPOINTED = resources_checkpointed_in(bindparam("plan"), decision_groups_only=True)


@cache
def _put_context(dialect: str) -> Insert:
    """INSERT ... ON CONFLICT DO NOTHING in the dialect's words (loaded when first used:
    commands on SQLite never load PostgreSQL's dialect)."""
    module = import_module(f"sqlalchemy.dialects.{dialect}")
    made = module.insert(ContextBlobRow).on_conflict_do_nothing(index_elements=["context_hash"])
    return cast(Insert, made)


class NewGroup(NamedTuple):
    """A checkpoint group being recorded: what its row needs. Not a ``CheckpointGroup``: its values are the engine's own (a ULID it made, a plan
    already validated, the clock), and validating them cost ~5 µs alone, three times that
    within a recording (issue 22)."""

    group_id: str
    plan_id: str
    created_at: datetime


class LiveCheckpoint(NamedTuple):
    """What pruning needs of a live checkpoint (``Recording.live_rows``): past its budget a
    resource's every live checkpoint is read at each recording, and making each a model
    cost ~20 µs (50 by default: 1 ms a recording)."""

    checkpoint_id: str
    resource_id: str
    checkpoint_type: CheckpointType
    ref: str
    pruned_at: None = None  # live


class Unread(Enum):
    """A value not read yet (``store_decision``'s ``parent_plan``: None is a value there)."""

    UNREAD = "unread"


UNREAD = Unread.UNREAD


def _refs(refs: Sequence[tuple[str, str]]) -> str:
    return mapping.dump_json([list(r) for r in refs])


class Recording:
    """One transaction of recording statements; nothing is written unless :meth:`commit`
    is called (as a unit of work: ``write=True`` takes SQLite's write lock at BEGIN, and
    each commit passes the ``store.commit`` failpoint). Without ``write`` it only reads
    (a write is refused; on PostgreSQL it runs without BEGIN: see ``Driver.begin``).
    ``driver``: run on this connection (see :func:`recordings`) instead of checking one
    out of the pool."""

    def __init__(self, engine: Engine, write: bool = False, driver: Driver | None = None) -> None:
        self._engine = engine
        self._write = write
        self._shared = driver

    def __enter__(self) -> Recording:
        if self._shared is None:
            self._own = self._engine.connect()
            self._driver = Driver(self._engine, self._own)
        else:
            self._driver = self._shared
        self._open = False
        self._held: tuple[Executable, Values, str | None] | None = None
        # the plan's writes read with the number: (plan, after event, rows)
        self._writes: tuple[str, int, list[tuple[int, str]]] | None = None
        self._begun = not self._write
        if self._write:
            self._driver.check_write()  # refused up front, as at BEGIN
        else:
            self._driver.begin(False)
        self._open = True
        return self

    def commit(self) -> None:
        failpoints.hit("store.commit")
        if self._begun:
            self._driver.commit()
        elif self._held is not None:  # one statement: a transaction of its own
            statement, values, missing = self._held
            self._held = None
            self._checked(self._driver.alone(statement, values), missing)
        self._open = False

    def __exit__(self, *exc_info: object) -> None:
        try:
            if self._open and self._begun:
                self._driver.rollback()  # (a held statement was never sent)
        finally:
            if self._shared is None:
                self._own.close()

    def _now(self) -> Driver:
        """The driver, in this transaction: a writer's begins at its second statement, the
        first one (held until then) sent after BEGIN."""
        if not self._begun:
            self._driver.begin(True)
            self._begun = True
            if self._held is not None:
                statement, values, missing = self._held
                self._held = None
                self._checked(self._driver.execute(statement, values), missing)
        return self._driver

    def _send_write(
        self, statement: Executable, values: Values, missing: str | None = None
    ) -> None:
        """A write of one row (``missing``: the error when it changes none). A writer's first
        is held: alone in the transaction, it is sent at :meth:`commit` as a transaction of
        its own (one statement where BEGIN, it and COMMIT were three; the pending group's)."""
        if not self._begun and self._held is None:
            self._held = (statement, values, missing)
            return
        self._checked(self._now().execute(statement, values), missing)

    @staticmethod
    def _checked(count: int, missing: str | None) -> None:
        if missing is not None and count != 1:
            raise NotFoundError(missing)

    # --- reads -------------------------------------------------------------------------

    def next_sequence_number(
        self, plan_id: str, parent_id: str | None, writes_after: int | None = None
    ) -> tuple[int, str | None]:
        """The plan's next sequence number, and the plan of decision ``parent_id`` (None when
        there is no such decision) — one statement: a decision's plan never changes (append-
        only), so the decision's transaction checks its parent with what is read here.
        ``writes_after``: the same statement reads the plan's writes after that event, which
        :meth:`resources_written_since` then answers from (one statement fewer)."""
        values = {"plan": plan_id, "parent": parent_id}
        if writes_after is None:
            [(top, parent_plan)] = self._now().fetch(_NUMBER_AND_PARENT, values)
        else:
            rows = self._now().fetch(_NUMBER_AND_WRITES, {**values, "after": writes_after})
            [(top, parent_plan)] = [(n, s) for k, n, s in rows if k == 0]
            events = sorted((n, s) for k, n, s in rows if k == 1)
            self._writes = (plan_id, writes_after, events)
        return (0 if top is None else int(top) + 1), parent_plan

    def resources_checkpointed(self, plan_id: str) -> set[str]:
        """The resources with checkpoint rows of decision groups in the plan (every row of
        the plan: read once per run, see PlanSandboxes.modified)."""
        return {row[0] for row in self._now().fetch(_CHECKPOINTED, {"plan": plan_id})}

    def resources_written_since(self, plan_id: str, after_event: int) -> tuple[set[str], int]:
        """The resources of the plan's ``resource_written`` events after event ``after_event``,
        and the last event id read (so the next call reads only newer ones)."""
        written: set[str] = set()
        last = after_event
        read, self._writes = self._writes, None
        if read is not None and read[:2] == (plan_id, after_event):
            rows: list[Any] = read[2]  # read with the sequence number
        else:
            rows = self._now().fetch(_WRITTEN_SINCE, {"plan": plan_id, "after": after_event})
        for event_id, raw in rows:
            payload = mapping.load_json("events", plan_id, "payload", raw)
            if isinstance(payload, dict) and "resource" in payload:
                written.add(str(payload["resource"]))
            last = event_id
        return written, last

    def count_live(self, plan_id: str, resource_id: str) -> int:
        """How many live checkpoints one resource has in the plan (the partial index alone)."""
        return int(self._now().scalar(_COUNT_LIVE, {"plan": plan_id, "resource": resource_id}))

    def live_rows(self, plan_id: str, resource_id: str) -> list[LiveCheckpoint]:
        """One resource's live checkpoints in the plan, oldest first (the partial index of
        migration 0009: as many as its budget keeps, whatever the plan's size)."""
        return [
            LiveCheckpoint(checkpoint_id, resource, CheckpointType(kind), ref)
            for checkpoint_id, resource, kind, ref in self._now().fetch(
                _LIVE_ROWS, {"plan": plan_id, "resource": resource_id}
            )
        ]

    # --- writes ------------------------------------------------------------------------

    def open_group(self, group: NewGroup, refs: Sequence[tuple[str, str]]) -> None:
        """Insert ``group`` pending, with the checkpoint refs made for it so far."""
        self._send_write(
            _INSERT_GROUP,
            {
                "group_id": group.group_id,
                "plan_id": group.plan_id,
                "decision_id": None,
                "status": PENDING,
                "created_at": group.created_at,
                "pending_refs": _refs(refs),
            },
        )

    def note_refs(self, group_id: str, refs: Sequence[tuple[str, str]]) -> None:
        """Replace the refs noted on a pending group (the caller holds the full list)."""
        missing = f"no pending checkpoint group {group_id}"
        self._send_write(_NOTE_REFS, {"group": group_id, "refs": _refs(refs)}, missing)

    def store_decision(
        self,
        decision: Decision,
        group: NewGroup | None = None,
        checkpoints: Sequence[Mapping[str, Any]] = (),
        *,
        pending: bool = False,
        parent_plan: str | Unread | None = UNREAD,
        values: mapping.DecisionValues | None = None,
    ) -> None:
        """Insert the decision and, for an Execute decision, its checkpoint rows, and commit
        its group: flip it from pending (``pending``), or insert it committed (no checkpoint
        was made for it). ``checkpoints``: the rows' values, as ``CheckpointMetadata``
        dumps them. ``parent_plan``: the parent's plan as :meth:`next_sequence_number`
        read it (read here when not given). ``values``: ``mapping.decision_values(decision)``
        when the caller has made them already."""
        self._check_parent(decision, parent_plan)
        row, deps, artifacts = values or mapping.decision_values(decision)
        self._send_write(_INSERT_DECISION, row)
        driver = self._now()
        if deps:
            driver.executemany(_INSERT_EDGES, deps)
        if artifacts:
            driver.executemany(_INSERT_ARTIFACTS, artifacts)
        if group is None:
            return
        if pending:
            flipped = driver.execute(
                _COMMIT_GROUP, {"group": group.group_id, "decision": decision.decision_id}
            )
            self._checked(flipped, f"no pending checkpoint group {group.group_id}")
        else:
            driver.execute(
                _INSERT_GROUP,
                {
                    "group_id": group.group_id,
                    "plan_id": group.plan_id,
                    "decision_id": decision.decision_id,
                    "status": COMMITTED,
                    "created_at": group.created_at,
                    "pending_refs": "[]",
                },
            )
        if checkpoints:
            driver.executemany(_INSERT_CHECKPOINTS, checkpoints)

    def _check_parent(self, decision: Decision, parent_plan: str | Unread | None) -> None:
        parent = decision.parent_decision_id
        if parent is None:
            return
        if parent_plan is UNREAD:
            parent_plan = self._now().scalar(_PARENT_PLAN, {"parent": parent})
        decision.check_parent_plan(cast(str | None, parent_plan))

    def add_edges(self, downstream: str, upstreams: Sequence[str], kind: str) -> None:
        """Influence edges from each of ``upstreams`` to ``downstream`` (one statement)."""
        if upstreams:
            self._now().executemany(
                _INSERT_EDGES,
                [
                    {
                        "upstream_decision_id": u,
                        "downstream_ref": downstream,
                        "dependency_type": kind,
                    }
                    for u in upstreams
                ],
            )

    def put_context(self, context_hash: str, body: str) -> None:
        """Store a context once: a second decision made in the same context adds nothing."""
        self._send_write(
            _put_context(self._engine.dialect.name),
            {"context_hash": context_hash, "body": body, "created_at": utc_now()},
        )

    def append_event(self, kind: str, payload: dict[str, object], plan_id: str) -> None:
        self._send_write(
            _INSERT_EVENT,
            {
                "plan_id": plan_id,
                "kind": kind,
                "actor": None,
                "payload": mapping.dump_json(payload),
                "created_at": utc_now(),
            },
        )

    def mark_pruned(self, checkpoint_ids: Iterable[str]) -> None:
        now = utc_now()
        rows = [{"id": checkpoint_id, "now": now} for checkpoint_id in checkpoint_ids]
        if rows:
            self._now().executemany(_MARK_PRUNED, rows)


class HeldConnections:
    """One idle connection kept from one recording to the next (``Store`` holds this;
    :meth:`close` with the store). Checking one out of the pool for each recording cost
    ~15 µs, and on PostgreSQL ~80 µs: the pool pings the server at every checkout. The
    held connection is pinged by its first statement instead: if the server dropped it,
    that statement goes again on a new connection (``Driver.retry_first``). One, whichever
    thread records: a recording made while another holds it checks one out of the pool as
    before, and only one goes back to be held (no connection kept per thread)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._lock = threading.Lock()
        self._idle: Driver | None = None

    def take(self) -> Driver:
        with self._lock:
            driver, self._idle = self._idle, None
        if driver is not None and driver.idle():
            driver.retry_first = True
            driver.new_recording()
            return driver
        if driver is not None:
            driver.close()
        return Driver(self._engine, self._engine.connect())  # the pool pings it

    def give_back(self, driver: Driver) -> None:
        driver.retry_first = False
        kept = False
        if driver.idle():
            with self._lock:
                if self._idle is None:
                    self._idle, kept = driver, True
        if not kept:
            driver.close()  # back to the pool: one is held already, or it is unusable

    def close(self) -> None:
        """Return the held connection to the pool (before the engine is disposed)."""
        with self._lock:
            driver, self._idle = self._idle, None
        if driver is not None:
            driver.close()


@contextmanager
def recordings(held: HeldConnections) -> Iterator[Callable[[bool], Recording]]:
    """Transactions (``write`` or not) one after the other on one connection, the one
    held for recordings (a recording's several transactions, and the next recording's,
    take no connection from the pool)."""
    driver = held.take()
    try:

        def transaction(write: bool = False) -> Recording:
            return Recording(driver.engine, write, driver)

        yield transaction
    finally:
        held.give_back(driver)
