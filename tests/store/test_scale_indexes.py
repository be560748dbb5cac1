"""Large plans' indexes (migrations 0008 and 0010, issue 22) reach existing databases, and
the reads they were made for use them.

A database made by an older version is upgraded by `agents db upgrade`; afterwards the
indexes are there on SQLite and PostgreSQL. On SQLite the query plan of a revert's later
writers (store/correction_queries.calls_of, its ``later`` writes) looks up the plan's calls that wrote
something by the resource they name (before 0010: read every such call of the plan; before
0008, every decision), and a plan's guidance decisions start from the plan-and-type index.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from click.testing import CliRunner
from sqlalchemy import Engine, event, text
from sqlalchemy.orm import Session

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.enums import CheckpointType
from cleveragents_tui.store import correction_queries, snapshot_reads
from cleveragents_tui.store.app_queries import AppQueries
from cleveragents_tui.store.database import make_engine, normalise_url
from cleveragents_tui.store.repositories import CheckpointRepository, DecisionRepository
from cleveragents_tui.store.schema import SCHEMA_HEAD, current_revision
from cleveragents_tui.store.store import Store
from tests.support.scale_plan import FILES, add_pruned_groups, build

NEW_INDEXES = {
    "events": {"ix_events_model_cost"},  # migration 0013
    "decisions": {
        "ix_decisions_plan_type_sequence",
        "ix_decisions_plan_step_key",
        "ix_decisions_corrects",  # migration 0012
        "ix_decisions_superseded_by",
    },
    "tool_invocations": {
        "ix_tool_invocations_plan_id",
        "ix_tool_invocations_plan_writes",
        "ix_tool_invocations_plan_resource_writes",  # migration 0010
    },
}
# by name from the catalogue: SQLAlchemy does not reflect SQLite's expression indexes
_NAMES = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = :t",
    "postgresql": "SELECT indexname FROM pg_indexes WHERE tablename = :t",
}


def _indexes(store: Store) -> dict[str, set[str]]:
    with store.engine.connect() as connection:
        names = text(_NAMES[connection.dialect.name])
        return {
            table: set(connection.execute(names, {"t": table}).scalars()) for table in NEW_INDEXES
        }


def test_an_0007_database_gets_the_scale_indexes_from_db_upgrade(db_url: str) -> None:
    engine = make_engine(normalise_url(db_url))
    config = Config()
    config.set_main_option("script_location", "cleveragents_tui.store:migrations")
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0007")
    engine.dispose()

    result = CliRunner().invoke(cli, ["--db", db_url, "db", "upgrade"])

    assert result.exit_code == 0, result.output
    assert f"schema upgraded from 0007 to revision {SCHEMA_HEAD}" in result.output
    store = Store.open(db_url)
    try:
        assert current_revision(store.engine) == SCHEMA_HEAD
        found = _indexes(store)
        for table, names in NEW_INDEXES.items():
            assert names <= found[table], (table, found[table])
    finally:
        store.close()


@contextmanager
def _heard(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """Each statement sent inside the block, with its parameters as the driver got them."""
    sent: list[tuple[str, Any]] = []

    def note(*args: Any) -> None:
        sent.append((args[2], args[3]))

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", note)


def _query_plan(store: Store, sql: str, params: Any) -> str:
    with store.engine.connect() as connection:
        rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row[-1]) for row in rows)


def test_later_writers_and_guidance_start_from_their_indexes(tmp_path: Path) -> None:
    scale = build(tmp_path, 300)
    try:
        with Session(scale.store.engine) as session:
            session.connection()  # BEGIN sent before counting
            with _heard(scale.store.engine) as sent:
                later_writes = (scale.plan_id, 0, [FILES])
                writes = correction_queries.calls_of(session, [], [], later_writes)[1]
                snapshot_reads.guidance_decisions(session, scale.plan_id)
                steps = DecisionRepository(session).current_steps(scale.plan_id, {"step-1"})
        assert set(steps) == {"step-1"}
        assert writes  # the action's steps wrote to the files after the first decision
        later, guidance, step = (_query_plan(scale.store, *s) for s in sent[1:4])
    finally:
        scale.store.close()
    # the plan's writes by the resource they name (migration 0010): those to the files only
    assert "ix_tool_invocations_plan_resource_writes (plan_id=? AND <expr>=?)" in later, later
    assert "ix_decisions_plan_type_sequence" in guidance, guidance
    assert "ix_decisions_plan_step_key" in step, step


def test_a_reverts_reads_of_checkpoints_and_corrections_do_not_walk_the_plan(
    tmp_path: Path,
) -> None:
    """A plan holds a checkpoint group at each Execute decision: a revert's reads of each
    resource's first checkpoint, of its decisions' groups, of the resources checkpointed
    and of the decisions that correct or superseded others start from their own indexes
    (0011, 0012), never from the plan's (which would read each of its rows)."""
    scale = build(tmp_path, 300)
    add_pruned_groups(scale, keep=set())
    decision = scale.ids[5]
    try:
        with Session(scale.store.engine) as session:
            session.connection()
            with _heard(scale.store.engine) as sent:
                basis = CheckpointRepository(session).basis(scale.plan_id, decision)
                checkpointed = CheckpointRepository(session).resources_checkpointed(
                    scale.plan_id, decision_groups_only=True
                )
                snapshot_reads.correcting(session, scale.plan_id, decision)
                correction_queries.superseded_by_any(session, scale.plan_id, [decision])
        plans = [_query_plan(scale.store, *s) for s in sent]
    finally:
        scale.store.close()
    assert {c.decision_id for c in basis} >= {decision}  # its group, and the baselines
    assert len({c.resource_id for c in basis if c.decision_id != decision}) == 1
    assert checkpointed == {FILES}
    first, resources, correcting, superseded = plans
    for plan in plans:
        assert "(plan_id=?)" not in plan, plan
        assert "SCAN decisions" not in plan and "SCAN checkpoint_metadata" not in plan, plan
    assert "ix_checkpoint_metadata_decision_id (decision_id=?)" in first, first
    assert "ix_checkpoint_metadata_plan_resource_created" in resources, resources
    assert "ix_decisions_corrects (corrects_decision_id=?)" in correcting, correcting
    assert "ix_decisions_superseded_by (superseded_by=?)" in superseded, superseded


def test_a_reverts_destroyed_savepoints_are_marked_from_the_resources_index(
    tmp_path: Path, db_url: str
) -> None:
    """A revert of a database marks the resource's checkpoints after its target pruned
    (``ROLLBACK TO SAVEPOINT`` destroyed them) in one statement — exactly the live ones
    after the target in ``for_plan``'s order — that on SQLite starts from the plan's
    (resource, time) index, not from every checkpoint of the plan."""
    scale = build(tmp_path, 300, db_url)
    add_pruned_groups(scale, keep=set())
    with scale.store.unit_of_work() as uow:
        before = uow.checkpoints.for_plan(scale.plan_id, FILES)
    target = next(c for c in before if c.pruned_at is None)
    later = before[before.index(target) + 1 :]
    expected = {c.checkpoint_id for c in later if c.pruned_at is None}
    try:
        with Session(scale.store.engine) as session:
            session.connection()
            with _heard(scale.store.engine) as sent:
                correction_queries.prune_later(session, scale.plan_id, target)
            session.commit()
        with scale.store.unit_of_work() as uow:
            after = uow.checkpoints.for_plan(scale.plan_id, FILES)
        sqlite = scale.store.engine.dialect.name == "sqlite"
        plans = [_query_plan(scale.store, *s) for s in sent] if sqlite else []
    finally:
        scale.store.close()
    assert expected  # the run's own checkpoints after its first
    was_pruned = {c.checkpoint_id for c in before if c.pruned_at is not None}
    assert {c.checkpoint_id for c in after if c.pruned_at is not None} - was_pruned == expected
    assert len(sent) == 1
    for plan in plans:
        assert "(plan_id=?)" not in plan and "SCAN checkpoint_metadata" not in plan, plan
        assert "ix_checkpoint_metadata_plan_resource_created" in plan, plan


def test_a_failed_calls_reads_gc_and_a_refused_applys_revert_start_from_indexes(
    tmp_path: Path,
) -> None:
    """What a run reads when a tool call fails (the decision's retries, the resource's
    latest pre-write checkpoint), what `agents gc` starts from, the Strategize decision a
    refused Apply reverts to, and a decision's checkpoint group (`plan explain`, the app's
    details): each from its own index, none reading every row of the
    plan's decisions (they read every decision or checkpoint whole before, ~70 µs a
    decision)."""
    scale = build(tmp_path, 300)
    add_pruned_groups(scale, keep=set())
    try:
        with Session(scale.store.engine) as session:
            session.connection()
            decisions, checkpoints = DecisionRepository(session), CheckpointRepository(session)
            with _heard(scale.store.engine) as sent:
                children = decisions.current_children(scale.ids[0])
                checkpoints.latest_of_type(scale.plan_id, FILES, CheckpointType.PRE_WRITE)
                checkpoints.superseded_live(scale.plan_id, datetime.now(UTC))
                first = decisions.first_current(scale.plan_id, "strategize", "prompt_definition")
                group = checkpoints.group_of(scale.plan_id, scale.ids[5])
        plans = [_query_plan(scale.store, *s) for s in sent if "FROM decision_" not in s[0]]
        with scale.store.unit_of_work() as uow:
            strategy = next(
                d.decision_id
                for d in uow.decisions.for_plan(scale.plan_id)
                if d.decision_type.value == "strategy_choice"
            )
    finally:
        scale.store.close()
    assert children and all(c.parent_decision_id == scale.ids[0] for c in children)
    assert first == strategy
    assert group is not None and group.decision_id == scale.ids[5]
    retries, pre_write, collectable, strategize, details = plans
    assert "ix_decisions_parent_decision_id (parent_decision_id=?)" in retries, retries
    assert "ix_checkpoint_metadata_plan_resource_created" in pre_write, pre_write
    # the plan's checkpoint rows, read in the database: only the matching ones are returned
    assert "USING INDEX ix_checkpoint_metadata_plan" in collectable, collectable
    # in the plan's sequence order, stopping at the first: no sort of the plan's rows
    assert "TEMP B-TREE" not in strategize, strategize
    assert "ix_checkpoint_groups_decision_id (decision_id=?)" in details, details
    for plan in plans:
        assert "SCAN decisions" not in plan and "SCAN checkpoint_metadata" not in plan, plan


def test_the_progress_lines_reads_start_from_indexes(tmp_path: Path) -> None:
    """What `--progress` reads every quarter second — the decisions after the last seen, the
    calls of the decisions from the last seen on, the events after the last — each from an
    index, so that a large plan's run is not slowed by its own progress lines."""
    scale = build(tmp_path, 300)
    try:
        with Session(scale.store.engine) as session:
            session.connection()
            queries = AppQueries(session)
            with _heard(scale.store.engine) as sent:
                decisions = queries.recorded_since(scale.plan_id, 290)
                calls = queries.calls_since(scale.plan_id, 0)
                queries.events_of([scale.plan_id], 0)
        plans = [_query_plan(scale.store, *s) for s in sent]
    finally:
        scale.store.close()
    assert [row.sequence_number for _, row in decisions] == list(range(291, 300))
    assert calls  # the scale plan's calls, its decisions' from the first on
    recorded, made, logged = plans
    assert "(plan_id=? AND sequence_number>?)" in recorded, recorded
    assert "(plan_id=? AND sequence_number>?)" in made, made
    assert "ix_tool_invocations_decision_id (decision_id=?)" in made, made
    assert "SCAN" not in logged.replace("SCAN CONSTANT ROW", ""), logged
    for plan in plans:
        assert "SCAN decisions" not in plan and "SCAN tool_invocations" not in plan, plan
