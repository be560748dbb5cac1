"""Whether the target still holds what the sandbox started from (or already what it made).

Every row the plan changed must be, in the target, as it was in ``base``; the rows are
locked while this is checked (not by a dry run, which reads in a read-only transaction).
A target holding the final values counts as landed.
"""

from __future__ import annotations

from collections import Counter

import psycopg
from psycopg import sql

from cleveragents_tui.sandbox.postgres_copy.catalog import (
    Row,
    Table,
    as_text,
    ident,
    label,
    next_value,
    read_tables,
    schema_of,
)
from cleveragents_tui.sandbox.postgres_copy.land_plan import Plan


def _locking(lock: bool) -> sql.Composable:
    return sql.SQL(" FOR UPDATE" if lock else "")


def _target_rows(
    connection: psycopg.Connection[tuple[object, ...]], table: Table, keys: list[Row], lock: bool
) -> dict[Row, Row]:
    """The target's rows at ``keys``, locked, in one query (keys compared as text)."""
    names = [column.name for column in table.columns]
    positions = [names.index(column) for column in table.key]
    labels = [sql.Identifier(f"k{i}") for i in range(len(table.key))]
    query = sql.SQL(
        "SELECT {} FROM {} WHERE ({}) IN (SELECT {} FROM unnest({}) AS k({})){}"
    ).format(
        as_text(names),
        ident(table.name),
        as_text(table.key),
        sql.SQL(", ").join(labels),
        sql.SQL(", ").join(sql.SQL("%s::text[]") for _ in table.key),
        sql.SQL(", ").join(labels),
        _locking(lock),
    )
    columns = [[key[i] for key in keys] for i in range(len(table.key))]
    found: dict[Row, Row] = {}
    for values in connection.execute(query, columns).fetchall():
        row: Row = tuple(None if v is None else str(v) for v in values)
        found[tuple(row[i] for i in positions)] = row
    return found


def _target_bag(
    connection: psycopg.Connection[tuple[object, ...]], table: Table, lock: bool
) -> Counter[Row]:
    query = sql.SQL("SELECT {} FROM {}{}").format(
        as_text(c.name for c in table.columns), ident(table.name), _locking(lock)
    )
    return Counter(
        tuple(None if v is None else str(v) for v in row)
        for row in connection.execute(query).fetchall()
    )


def _whole(
    connection: psycopg.Connection[tuple[object, ...]], table: Table, lock: bool
) -> tuple[dict[Row, Row], Counter[Row]] | None:
    """Every row of ``table`` in the target (locked), as :func:`read_tables` keys them; None
    when the target has no such table or other columns."""
    present = read_tables(connection, {table.name}).get(table.name)
    if present is None or present.columns != table.columns:
        return None
    if lock:
        connection.execute(sql.SQL("SELECT 1 FROM {} FOR UPDATE").format(ident(table.name)))
    return present.rows, present.bag


def differs(
    connection: psycopg.Connection[tuple[object, ...]],
    landing: Plan,
    final: bool,
    *,
    lock: bool = True,
) -> str | None:
    """None when the target holds the base (or, with ``final``, the final) version of
    everything the plan changes; else the first thing that differs. Locks those rows
    (unless ``lock`` is False: a dry run's read-only transaction)."""
    for change in landing.changes:
        if change.empty:
            continue
        table = change.table
        if change.changed:
            expected = table if final else change.base
            present = _target_rows(connection, table, change.changed, lock)
            for key in change.changed:
                if present.get(key) != expected.rows.get(key):
                    shown = key[0] if len(key) == 1 else key
                    return f"row {shown} of table {table.label} changed"
            continue
        # Without a key, what is checked is that the rows to delete (or, landed, the rows
        # added) are there.
        if (change.added if final else change.removed) - _target_bag(connection, table, lock):
            return f"rows of table {table.label} (it has no primary key) changed"
    for table in (landing.rebuilt if final else landing.replaced).values():
        if _whole(connection, table, lock) != (table.rows, table.bag):
            return f"rows of table {table.label} changed"
    if final and landing.schema and schema_of(connection) != landing.schema:
        return "its schema is not the plan's"
    if final:
        for name, value in landing.sequences.items():
            query = sql.SQL("SELECT last_value, is_called FROM {}").format(ident(name))
            row = connection.execute(query).fetchone()
            if row is None or next_value((int(str(row[0])), bool(row[1]))) < next_value(value):
                return f"sequence {label(name)} is behind"
    return None


def same_shape(connection: psycopg.Connection[tuple[object, ...]], landing: Plan) -> str | None:
    """The first table the plan changes whose columns differ in the target, if any."""
    target = {line for line in schema_of(connection) if line.startswith("column ")}
    for change in landing.changes:
        if change.empty:
            continue
        schema, name = change.table.name
        for column in change.table.columns:
            line = f"column {schema}.{name}.{column.name} {column.definition!r}"
            if line not in target:
                return f"the columns of table {change.table.label} are defined differently"
    return None
