"""Landing a PostgreSQL sandbox: the rows that differ between two copies, written into the target.

A ``postgres_copy`` sandbox (:mod:`.sandbox`) keeps the database as it was at creation
(``base``) and as the plan left it (``final``), each a database of its own on the target's
server. Apply re-runs nothing: it writes the rows that differ between the two into the
target in one transaction, so what lands is exactly what the plan produced, values of
``now()``, ``random()``, ``gen_random_uuid()``, sequences and triggers included.

* Values travel as PostgreSQL's own text form (what ``COPY`` uses), read and written with
  the same session settings on every connection, so each lands as it was and compares
  exactly; the server casts the text back to the column's type.
* Rows are matched by primary key; a table without one compares its rows as a multiset
  (a changed row is one deletion plus one insertion).
* Inserts and updates go parents first and deletions children first (foreign keys), with
  ``OVERRIDING SYSTEM VALUE`` (identity columns keep the plan's values); generated columns
  are computed by the server. The target's enabled user triggers on the tables written are
  disabled inside the transaction and enabled again before it commits, so landing does not
  fire them a second time: their effects are already in the final rows.
* Sequences the plan advanced are set to the larger of the target's value and the plan's,
  so no value the plan used is handed out again.
* Schema changes: the schema statements the plan ran (``CREATE``, ``ALTER``, ``DROP``,
  ``COMMENT``, ``GRANT``, ``REVOKE``, in order, as the sandbox logged them) run again in
  the landing transaction, before the rows; the target must then have exactly the final
  copy's schema, or nothing lands. A table they created or reshaped (and one they drop)
  must hold, before they run, exactly its rows at ``base``; after them its rows are made
  those of the final copy (an ``ADD COLUMN ... DEFAULT now()`` gets the sandbox's values,
  not the Apply's). A schema that changed without such a statement (a function running
  DDL) is refused.
* Conflicts: every row the plan changed must still be, in the target, as it was in
  ``base`` (the rows are locked while this is checked). Rows the plan did not touch may
  have changed meanwhile; they are kept. A target that already holds the final values of
  every change (an Apply that committed, then died before recording it) counts as landed.
  A conflict or any error rolls the transaction back: nothing is half-landed (but a
  sequence set before the error stays moved forward: PostgreSQL never rolls them back).

Every identifier is quoted with :class:`psycopg.sql.Identifier`; every value is a parameter.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from cleveragents_tui import failpoints
from cleveragents_tui.sandbox.landing import LandConflictError, Landed
from cleveragents_tui.sandbox.postgres_copy.catalog import read_tables, schema_of, session
from cleveragents_tui.sandbox.postgres_copy.land_checks import differs, same_shape
from cleveragents_tui.sandbox.postgres_copy.land_plan import Plan, diff_table, objects, plan
from cleveragents_tui.sandbox.postgres_copy.land_write import write_rows


def land(
    target: psycopg.Connection[tuple[object, ...]],
    base: psycopg.Connection[tuple[object, ...]],
    final: psycopg.Connection[tuple[object, ...]],
    statements: Sequence[str] = (),
) -> Landed:
    """Write into ``target`` what differs between ``base`` and ``final``, in one transaction.

    ``target`` must not be in a transaction (autocommit off); ``base`` and ``final`` are
    only read. Raises :class:`LandConflictError` or :class:`psycopg.Error`, the target
    unchanged."""
    for connection in (target, base, final):
        session(connection)
    landing = plan(base, final, statements)
    if landing.empty:
        return Landed(0, already=False)
    try:
        with target.transaction():
            shape = same_shape(target, landing)
            conflict = shape or differs(target, landing, final=False)
            if conflict is not None:
                if differs(target, landing, final=True) is None:
                    raise _AlreadyLanded
                raise LandConflictError(_conflict(shape, conflict))
            _run_schema_statements(target, landing)
            written = write_rows(target, landing)
            failpoints.hit("postgres.land", "commit")  # a crash here: nothing landed
    except _AlreadyLanded:
        return Landed(0, already=True)
    failpoints.hit("postgres.land", "committed")  # here: landed, the sandbox not told
    return Landed(written, already=False)


def refusal(
    target: psycopg.Connection[tuple[object, ...]],
    base: psycopg.Connection[tuple[object, ...]],
    final: psycopg.Connection[tuple[object, ...]],
    statements: Sequence[str] = (),
) -> str | None:
    """Why :func:`land` would refuse now, read in a read-only transaction rolled back (no row
    locked, nothing written): the checks it makes before running the plan's schema
    statements. None when they pass (the statements themselves are not tried). ``target``
    must not be in a transaction."""
    target.autocommit, target.read_only = True, True
    for connection in (target, base, final):
        session(connection)
    try:
        landing = plan(base, final, statements)
    except LandConflictError as exc:
        return str(exc)
    if landing.empty:
        return None
    with target.transaction(force_rollback=True):
        shape = same_shape(target, landing)
        conflict = shape or differs(target, landing, final=False, lock=False)
        if conflict is None or differs(target, landing, final=True, lock=False) is None:
            return None
        return _conflict(shape, conflict)


def _conflict(shape: str | None, conflict: str) -> str:
    if shape is not None:
        return f"the real database changed its schema: {shape}"
    return (
        f"the real database changed where the plan changed it since the sandbox was made: "
        f"{conflict}"
    )


def _run_schema_statements(
    connection: psycopg.Connection[tuple[object, ...]], landing: Plan
) -> None:
    """Run the plan's schema statements, check the schema they give, and add the tables
    they created or reshaped to the rows to land (against what the statements left)."""
    if not landing.statements:
        return
    for statement in landing.statements:
        connection.execute(statement.encode("utf-8"))  # the plan's own SQL, confined when run
    got = schema_of(connection)
    if got != landing.schema:
        raise LandConflictError(
            "the plan's schema statements gave the real database another schema than its "
            f"sandbox ({objects(got ^ landing.schema)})"
        )
    left = read_tables(connection, set(landing.rebuilt))
    for name, table in landing.rebuilt.items():
        landing.changes.append(diff_table(table, left[name]))


class _AlreadyLanded(Exception):
    """Leaves the landing transaction (rolled back: nothing to write)."""
