"""Writing a landing's rows into the target: deletions children first, then inserts and
updates parents first, with the target's user triggers off; sequences only ever forward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

import psycopg
from psycopg import sql

from cleveragents_tui.sandbox.postgres_copy.catalog import Name, Row, Table, ident, next_value
from cleveragents_tui.sandbox.postgres_copy.land_plan import Plan

_FOREIGN_KEYS = (
    "SELECT cn.nspname, c.relname, pn.nspname, p.relname FROM pg_constraint o "
    "JOIN pg_class c ON c.oid = o.conrelid JOIN pg_namespace cn ON cn.oid = c.relnamespace "
    "JOIN pg_class p ON p.oid = o.confrelid JOIN pg_namespace pn ON pn.oid = p.relnamespace "
    "WHERE o.contype = 'f'"
)
_TRIGGERS = (
    "SELECT t.tgname, t.tgenabled FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE NOT t.tgisinternal AND t.tgenabled IN ('O', 'A') AND n.nspname = %s "
    "AND c.relname = %s ORDER BY t.tgname"
)


def _order(connection: psycopg.Connection[tuple[object, ...]], names: Iterable[Name]) -> list[Name]:
    """``names`` parents first (by foreign key), as far as the references allow."""
    wanted = set(names)
    parents: dict[Name, set[Name]] = {name: set() for name in wanted}
    for child_schema, child, parent_schema, parent in connection.execute(_FOREIGN_KEYS):
        child_name, parent_name = (str(child_schema), str(child)), (str(parent_schema), str(parent))
        if child_name in wanted and parent_name in wanted and child_name != parent_name:
            parents[child_name].add(parent_name)
    ordered: list[Name] = []
    while parents:
        ready = sorted(name for name, needs in parents.items() if not needs - set(ordered))
        if not ready:  # a cycle: the rest in name order, the database decides
            ready = sorted(parents)
        for name in ready:
            ordered.append(name)
            del parents[name]
    return ordered


def _where(table: Table) -> sql.Composed:
    return sql.SQL(" AND ").join(
        sql.SQL("{} = %s").format(sql.Identifier(column)) for column in table.key
    )


@contextlib.contextmanager
def _triggers_off(
    connection: psycopg.Connection[tuple[object, ...]], names: Iterable[Name]
) -> Iterator[None]:
    """The enabled user triggers of ``names`` disabled, and enabled again as they were."""
    disabled: list[tuple[Name, str, str]] = []
    for name in names:
        for trigger, mode in connection.execute(_TRIGGERS, name).fetchall():
            connection.execute(
                sql.SQL("ALTER TABLE {} DISABLE TRIGGER {}").format(
                    ident(name), sql.Identifier(str(trigger))
                )
            )
            disabled.append((name, str(trigger), str(mode)))
    yield
    for name, trigger, mode in disabled:
        how = sql.SQL("ENABLE ALWAYS TRIGGER" if mode == "A" else "ENABLE TRIGGER")
        connection.execute(
            sql.SQL("ALTER TABLE {} {} {}").format(ident(name), how, sql.Identifier(trigger))
        )


def _insert(
    connection: psycopg.Connection[tuple[object, ...]], table: Table, rows: list[Row]
) -> int:
    """Insert ``rows`` (full rows of ``table``) in one pipelined batch; returns how many."""
    writable = [i for i, column in enumerate(table.columns) if column.writable]
    query = sql.SQL("INSERT INTO {} ({}) OVERRIDING SYSTEM VALUE VALUES ({})").format(
        ident(table.name),
        sql.SQL(", ").join(sql.Identifier(table.columns[i].name) for i in writable),
        sql.SQL(", ").join(sql.Placeholder() for _ in writable),
    )
    if rows:
        connection.cursor().executemany(query, [[row[i] for i in writable] for row in rows])
    return len(rows)


def _delete_one(connection: psycopg.Connection[tuple[object, ...]], table: Table, row: Row) -> None:
    matches = sql.SQL(" AND ").join(
        sql.SQL("{}::text IS NOT DISTINCT FROM %s").format(sql.Identifier(c.name))
        for c in table.columns
    )
    query = sql.SQL("DELETE FROM {0} WHERE ctid = (SELECT ctid FROM {0} WHERE {1} LIMIT 1)")
    connection.execute(query.format(ident(table.name), matches), row)


def write_rows(connection: psycopg.Connection[tuple[object, ...]], landing: Plan) -> int:
    """Make the target hold the final rows where the plan changed them; rows written."""
    by_name = {change.table.name: change for change in landing.changes if not change.empty}
    order = _order(connection, by_name)
    written = 0
    with _triggers_off(connection, order):
        for name in reversed(order):  # deletions, children first
            change = by_name[name]
            table = change.table
            gone = [key for key in change.changed if key not in table.rows]
            if gone:
                cursor = connection.cursor()
                query = sql.SQL("DELETE FROM {} WHERE {}").format(ident(name), _where(table))
                cursor.executemany(query, gone)
                written += len(gone)
            for row, count in change.removed.items():
                for _ in range(count):
                    _delete_one(connection, table, row)
                    written += 1
        for name in order:  # inserts and updates, parents first
            change = by_name[name]
            table = change.table
            new_rows: list[Row] = []
            updates: dict[tuple[str, ...], list[list[str | None]]] = {}
            for key in change.changed:
                new, old = table.rows.get(key), change.base.rows.get(key)
                if new is None:
                    continue
                if old is None:
                    new_rows.append(new)
                    continue
                sets = [
                    (column.name, value)
                    for column, value, before in zip(table.columns, new, old, strict=True)
                    if column.writable and value != before
                ]
                columns = tuple(column for column, _ in sets)
                if not columns:  # only generated columns differ: the server computes them
                    continue
                updates.setdefault(columns, []).append([v for _, v in sets] + list(key))
            for columns, params in updates.items():
                query = sql.SQL("UPDATE {} SET {} WHERE {}").format(
                    ident(name),
                    sql.SQL(", ").join(
                        sql.SQL("{} = %s").format(sql.Identifier(c)) for c in columns
                    ),
                    _where(table),
                )
                connection.cursor().executemany(query, params)
                written += len(params)
            written += _insert(connection, table, new_rows)
            written += _insert(connection, table, list(change.added.elements()))
    for name, value in landing.sequences.items():  # never backwards
        query = sql.SQL(
            "SELECT setval(%s::regclass, %s, %s) FROM {} WHERE %s > "
            "last_value + CASE WHEN is_called THEN 1 ELSE 0 END"
        ).format(ident(name))
        qualified = ident(name).as_string(connection)
        connection.execute(query, (qualified, value[0], value[1], next_value(value)))
    return written
