"""Row snapshots of a database: every user table's rows, keyed, compared and rendered.

An older savepoint's state cannot be read without destroying the newer ones, so the
savepoint sandbox records the rows at creation and at each checkpoint; the copy sandboxes
key their rows the same way. Paths are ``table/<key>`` (see docs/sandboxes.md).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from sqlalchemy import Connection, inspect, text

from cleveragents_tui.sandbox.base import Change, ChangeKind

DEFAULT_MAX_SNAPSHOT_ROWS: Final = 200_000

PG_TABLES = text(
    """
    SELECT n.nspname, c.relname, n.nspname = current_schema(),
           ARRAY(SELECT a.attname
                 FROM pg_index i
                 CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, position)
                 JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
                 WHERE i.indrelid = c.oid AND i.indisprimary
                 ORDER BY k.position)
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
      AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'
      AND has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'SELECT')
    """
)


@dataclass(frozen=True, slots=True)
class Table:
    """One table at one moment: its column names and its rows (row key -> values)."""

    columns: tuple[str, ...]
    rows: dict[str, tuple[Any, ...]]


# Table path ("name" or "schema.name") -> the table.
Snapshot = dict[str, Table]


def snapshot_digest(snapshot: Snapshot) -> str:
    """A digest of every row of a snapshot, logged with each savepoint: a replay that gives
    other values (not only other row counts) is caught at the savepoint where they differ."""
    digest = hashlib.sha256()
    for path in sorted(snapshot):
        table = snapshot[path]
        digest.update(repr((path, table.columns)).encode())
        for key in sorted(table.rows):
            digest.update(repr((key, table.rows[key])).encode())
    return digest.hexdigest()


def _json_default(value: object) -> object:
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    return str(value)


def render_row(columns: Sequence[str], row: Sequence[Any]) -> bytes:
    rendered = json.dumps(
        dict(zip(columns, row, strict=True)),
        default=_json_default,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return rendered.encode("utf-8")


def read_row(snapshot: Snapshot, path: str) -> bytes | None:
    """Row ``table/key`` of ``snapshot`` as UTF-8 JSON (``{"column": value}``); None when the
    row is absent or ``path`` names no row (a bare table name)."""
    table_path, separator, key = path.partition("/")
    table = snapshot.get(table_path)
    if table is None or not separator:
        return None
    row = table.rows.get(key)
    return None if row is None else render_row(table.columns, row)


_PLAIN_PART = re.compile(r"^[A-Za-z0-9 _.:@+=~-]*$")


def path_part(value: object) -> str:
    """A key or name as a path part: ``/``, ``,``, ``%`` and other specials percent-encoded."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    raw = str(value)
    return raw if _PLAIN_PART.match(raw) else quote(raw, safe=" _.:@+=~-")


def key_rows(
    rows: Iterable[Sequence[Any]], positions: Sequence[int], budget: int
) -> tuple[dict[str, tuple[Any, ...]], int] | None:
    """``rows`` keyed by their primary key (the columns at ``positions``), else by ``~hash``
    (``#2``, ``#3``... for a repeat), and how much of ``budget`` is left; None when there are
    more rows than ``budget``. Every database sandbox keys its rows so."""
    keyed: dict[str, tuple[Any, ...]] = {}
    for row in rows:
        budget -= 1
        if budget < 0:
            return None
        values = tuple(row)
        if positions:
            keyed[",".join(path_part(values[i]) for i in positions)] = values
            continue
        digest = hashlib.blake2b(repr(values).encode(), digest_size=8).hexdigest()
        key, duplicate = f"~{digest}", 1
        while key in keyed:
            duplicate += 1
            key = f"~{digest}#{duplicate}"
        keyed[key] = values
    return keyed, budget


def compare(old: Snapshot, new: Snapshot) -> list[Change]:
    """Row changes ``table/key``, plus a bare ``table`` entry for a table created or dropped.

    When a table's columns changed, every row it kept counts as modified.
    """
    changes: list[Change] = []
    empty = Table((), {})
    for path in old.keys() | new.keys():
        if path not in old:
            changes.append(Change(path, ChangeKind.ADDED))
        elif path not in new:
            changes.append(Change(path, ChangeKind.DELETED))
        before, after = old.get(path, empty), new.get(path, empty)
        if before is after:
            continue
        reshaped = bool(before.rows and after.rows) and before.columns != after.columns
        for key in before.rows.keys() | after.rows.keys():
            old_row, new_row = before.rows.get(key), after.rows.get(key)
            if old_row is None:
                changes.append(Change(f"{path}/{key}", ChangeKind.ADDED))
            elif new_row is None:
                changes.append(Change(f"{path}/{key}", ChangeKind.DELETED))
            elif reshaped or old_row != new_row:
                changes.append(Change(f"{path}/{key}", ChangeKind.MODIFIED))
    return sorted(changes, key=lambda change: change.path)


def list_tables(
    connection: Connection, dialect: str
) -> list[tuple[str, str | None, str, list[str]]]:
    """(path, schema, table, primary-key columns) of every user table, sorted by path.

    On PostgreSQL only tables this login may read: one refused SELECT would abort the
    whole transaction. Partitions are read through their parent, temporary tables skipped.
    """
    if dialect == "sqlite":
        inspector = inspect(connection)
        return [
            (path_part(table), None, table, list(pk["constrained_columns"]))
            for (_, table), pk in sorted(inspector.get_multi_pk_constraint().items())
        ]
    rows = connection.execute(PG_TABLES).all()
    tables = [
        (
            path_part(table) if is_default else f"{path_part(schema)}.{path_part(table)}",
            schema,
            table,
            list(pk),
        )
        for schema, table, is_default, pk in rows
    ]
    return sorted(tables, key=lambda entry: entry[0])


def take_snapshot(
    connection: Connection, dialect: str, max_rows: int, last: Snapshot | None
) -> Snapshot | None:
    """Every user table's rows as ``connection`` sees them; None above ``max_rows`` rows.

    Tables unchanged since ``last`` are shared with it, so memory grows with changes only.
    """
    preparer = connection.dialect.identifier_preparer
    snapshot: Snapshot = {}
    remaining = max_rows
    for path, schema, table, pk_columns in list_tables(connection, dialect):
        qualified = preparer.quote_identifier(table)
        if schema is not None:
            qualified = f"{preparer.quote_identifier(schema)}.{qualified}"
        # Identifiers from the catalog, always quoted: no user text reaches this SQL.
        result = connection.exec_driver_sql(f"SELECT * FROM {qualified}")  # noqa: S608
        columns = tuple(result.keys())
        keyed = key_rows(result, [columns.index(column) for column in pk_columns], remaining)
        if keyed is None:
            result.close()
            return None
        rows, remaining = keyed
        table_now = Table(columns, rows)
        previous = None if last is None else last.get(path)
        # Share unchanged tables between snapshots, so memory grows with changes only.
        snapshot[path] = previous if previous is not None and previous == table_now else table_now
    return snapshot
