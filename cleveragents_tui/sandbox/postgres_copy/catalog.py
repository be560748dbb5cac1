"""What landing reads of a PostgreSQL database: its tables, rows, schema and sequences.

Every value is read as PostgreSQL's own text form, with the same session settings on every
connection (:data:`SESSION`), so the two copies and the target compare exactly. Every
query reads user schemas only: not ``information_schema``, not ``pg_*``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

Row = tuple[str | None, ...]
Name = tuple[str, str]  # (schema, table or sequence)

# The same text form on every connection: dates, times, floats, intervals and bytes are
# printed (and read back) identically whatever the server's or the role's defaults.
SESSION = (
    "SET TimeZone = 'UTC'",
    "SET DateStyle = 'ISO, YMD'",
    "SET IntervalStyle = 'postgres'",
    "SET extra_float_digits = 3",
    "SET bytea_output = 'hex'",
)

# Every query below reads user schemas only: not information_schema, not pg_* (catalog, toast).
_TABLES = (
    "SELECT c.oid, n.nspname, c.relname FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition "
    "AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' "
    "ORDER BY n.nspname, c.relname"
)
_COLUMNS = (
    "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attgenerated, "
    "a.attidentity, pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a "
    "LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
    "WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
)
_PRIMARY_KEY = (
    "SELECT a.attname FROM pg_index i "
    "CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, position) "
    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
    "WHERE i.indrelid = %s AND i.indisprimary ORDER BY k.position"
)
# Everything but rows that a plan could change, one line per object, for comparing schemas.
_SCHEMA_OBJECTS = (
    "WITH s AS (SELECT oid, nspname FROM pg_namespace n "
    "WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%') "
    "SELECT 'constraint ' || s.nspname || '.' || c.relname || ' ' || o.conname || ' ' "
    "|| pg_get_constraintdef(o.oid) FROM pg_constraint o JOIN pg_class c ON c.oid = o.conrelid "
    "JOIN s ON s.oid = c.relnamespace "
    "UNION ALL SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indrelid JOIN s ON s.oid = c.relnamespace "
    "UNION ALL SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' ' || t.tgenabled::text "
    "FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN s ON s.oid = c.relnamespace "
    "WHERE NOT t.tgisinternal "
    "UNION ALL SELECT c.relkind::text || ' ' || s.nspname || '.' || c.relname || ' ' "
    "|| coalesce(pg_get_viewdef(c.oid), '') FROM pg_class c JOIN s ON s.oid = c.relnamespace "
    "WHERE c.relkind IN ('v', 'm', 'S', 'f') "
    "UNION ALL SELECT 'function ' || s.nspname || '.' || p.proname || '(' "
    "|| pg_get_function_identity_arguments(p.oid) || ') ' || md5(coalesce(p.prosrc, '')) "
    "FROM pg_proc p JOIN s ON s.oid = p.pronamespace "
    "UNION ALL SELECT 'type ' || s.nspname || '.' || t.typname || ' ' || t.typtype::text "
    "|| ' ' || coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) "
    "FROM pg_enum e WHERE e.enumtypid = t.oid), '') FROM pg_type t "
    "JOIN s ON s.oid = t.typnamespace WHERE t.typtype IN ('e', 'd', 'c') AND NOT EXISTS "
    "(SELECT 1 FROM pg_class c WHERE c.oid = t.typrelid AND c.relkind <> 'c') "
    "UNION ALL SELECT 'schema ' || s.nspname FROM s"
)
_SEQUENCES = (
    "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n "
    "ON n.oid = c.relnamespace WHERE c.relkind = 'S' "
    "AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%'"
)


@dataclass(frozen=True)
class Column:
    name: str
    definition: tuple[object, ...]  # type, not null, generated, identity, default
    writable: bool  # not a generated column


@dataclass
class Table:
    """One table of one copy: its columns, primary key and rows (as text)."""

    name: Name
    columns: tuple[Column, ...]
    key: tuple[str, ...]  # primary-key columns; () compares rows as a multiset
    rows: dict[Row, Row] = field(default_factory=dict)  # key -> row (keyed tables)
    bag: Counter[Row] = field(default_factory=Counter)  # rows of a table without a key

    @property
    def label(self) -> str:
        return label(self.name)


def label(name: Name) -> str:
    return name[1] if name[0] == "public" else f"{name[0]}.{name[1]}"


def session(connection: psycopg.Connection[tuple[object, ...]]) -> None:
    """Give ``connection`` the fixed text form of values (:data:`SESSION`)."""
    for statement in SESSION:
        connection.execute(statement)  # fixed text, no user input


def ident(name: Name) -> sql.Identifier:
    return sql.Identifier(name[0], name[1])


def as_text(columns: Iterable[str]) -> sql.Composed:
    return sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in columns)


def read_tables(
    connection: psycopg.Connection[tuple[object, ...]], only: set[Name] | None = None
) -> dict[Name, Table]:
    """Every user table (or those named ``only``) of the database ``connection`` is on,
    with all its rows as text."""
    tables: dict[Name, Table] = {}
    for oid, schema, relname in connection.execute(_TABLES).fetchall():
        if only is not None and (str(schema), str(relname)) not in only:
            continue
        columns = tuple(
            Column(str(row[0]), tuple(row[1:]), writable=row[3] == "")
            for row in connection.execute(_COLUMNS, (oid,)).fetchall()
        )
        key = tuple(str(row[0]) for row in connection.execute(_PRIMARY_KEY, (oid,)).fetchall())
        table = Table((str(schema), str(relname)), columns, key)
        names = [column.name for column in columns]
        query = sql.SQL("SELECT {} FROM {}").format(as_text(names), ident(table.name))
        positions = [names.index(column) for column in key]
        for values in connection.execute(query).fetchall():
            row: Row = tuple(None if v is None else str(v) for v in values)
            if positions:
                table.rows[tuple(row[i] for i in positions)] = row
            else:
                table.bag[row] += 1
        tables[table.name] = table
    return tables


def schema_of(connection: psycopg.Connection[tuple[object, ...]]) -> set[str]:
    """One line per schema object other than rows (tables and their columns included)."""
    lines = {str(row[0]) for row in connection.execute(_SCHEMA_OBJECTS).fetchall()}
    for oid, schema, relname in connection.execute(_TABLES).fetchall():
        for column in connection.execute(_COLUMNS, (oid,)).fetchall():
            lines.add(f"column {schema}.{relname}.{column[0]} {column[1:]!r}")
        lines.add(f"table {schema}.{relname}")
    return lines


def sequences(connection: psycopg.Connection[tuple[object, ...]]) -> dict[Name, tuple[int, bool]]:
    """Each user sequence's (last value, whether it was called)."""
    found: dict[Name, tuple[int, bool]] = {}
    for schema, relname in connection.execute(_SEQUENCES).fetchall():
        name = (str(schema), str(relname))
        query = sql.SQL("SELECT last_value, is_called FROM {}").format(ident(name))
        row = connection.execute(query).fetchone()
        assert row is not None
        found[name] = (int(str(row[0])), bool(row[1]))
    return found


def next_value(value: tuple[int, bool]) -> int:
    """What a sequence hands out next, for comparing (steps of 1 assumed)."""
    return value[0] + (1 if value[1] else 0)
