# Over 500 lines: one landing (read, plan, write); its steps share the catalog queries, none stands alone.
"""Landing a PostgreSQL sandbox: the rows that differ between two copies, written into the target.

A ``postgres_copy`` sandbox (``postgres_copy/``) keeps the database as it was at creation
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

import contextlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from cleveragents_tui import failpoints
from cleveragents_tui.sandbox.landing import LandConflictError, Landed

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
        return _label(self.name)


def _label(name: Name) -> str:
    return name[1] if name[0] == "public" else f"{name[0]}.{name[1]}"


def session(connection: psycopg.Connection[tuple[object, ...]]) -> None:
    """Give ``connection`` the fixed text form of values (:data:`SESSION`)."""
    for statement in SESSION:
        connection.execute(statement)  # fixed text, no user input


def _ident(name: Name) -> sql.Identifier:
    return sql.Identifier(name[0], name[1])


def _as_text(columns: Iterable[str]) -> sql.Composed:
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
        query = sql.SQL("SELECT {} FROM {}").format(_as_text(names), _ident(table.name))
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
        query = sql.SQL("SELECT last_value, is_called FROM {}").format(_ident(name))
        row = connection.execute(query).fetchone()
        assert row is not None
        found[name] = (int(str(row[0])), bool(row[1]))
    return found


def _next(value: tuple[int, bool]) -> int:
    """What a sequence hands out next, for comparing (steps of 1 assumed)."""
    return value[0] + (1 if value[1] else 0)


@dataclass
class _Change:
    table: Table  # the final copy's table
    base: Table
    changed: list[Row]  # keys whose rows differ (keyed tables)
    removed: Counter[Row]  # rows only in base (tables without a key)
    added: Counter[Row]  # rows only in final (tables without a key)

    @property
    def empty(self) -> bool:
        return not (self.changed or self.removed or self.added)


@dataclass
class Plan:
    """What landing changes, worked out from the two copies before the target is read."""

    changes: list[_Change]
    sequences: dict[Name, tuple[int, bool]]  # advanced by the plan: the final values
    statements: list[str] = field(default_factory=list)  # schema statements, in order
    rebuilt: dict[Name, Table] = field(default_factory=dict)  # created or reshaped: final
    replaced: dict[Name, Table] = field(default_factory=dict)  # reshaped or dropped: base
    schema: set[str] = field(default_factory=set)  # the final copy's (when it changed)

    @property
    def empty(self) -> bool:
        return (
            not self.sequences
            and not self.statements
            and all(change.empty for change in self.changes)
        )


_KINDS = {"v": "view", "m": "materialized view", "S": "sequence", "f": "foreign table"}


def _object(line: str) -> str:
    """The object a line of :func:`schema_of` describes, for people: ``table public.notes``."""
    words = line.split(" ")
    if words[0] in ("index", "trigger"):  # "index CREATE [UNIQUE] INDEX name ON ..."
        kind = words[0].upper()
        return f"{words[0]} {words[words.index(kind) + 1] if kind in words else words[1]}"
    if words[0] == "column":  # "column schema.table.name (...)": its table
        return "table " + words[1].rsplit(".", 1)[0]
    if words[0] == "constraint":
        return f"constraint {words[2]} of {words[1]}"
    return f"{_KINDS.get(words[0], words[0])} {words[1]}"


def _objects(lines: set[str]) -> str:
    what = sorted({_object(line) for line in lines})
    return ", ".join(what[:3]) + (f" and {len(what) - 3} more" if len(what) > 3 else "")


def _diff(table: Table, old: Table) -> _Change:
    """What differs between two versions of one table with the same columns."""
    if table.key:
        keys = table.rows.keys() | old.rows.keys()
        changed = sorted(
            (k for k in keys if table.rows.get(k) != old.rows.get(k)),
            key=lambda k: tuple("" if v is None else v for v in k),
        )
        return _Change(table, old, changed, Counter(), Counter())
    return _Change(table, old, [], old.bag - table.bag, table.bag - old.bag)


def plan(
    base: psycopg.Connection[tuple[object, ...]],
    final: psycopg.Connection[tuple[object, ...]],
    statements: Sequence[str] = (),
) -> Plan:
    """Compare the two copies. ``statements`` are the schema statements the plan ran;
    raises :class:`LandConflictError` when the schemas differ and there are none."""
    before, after = schema_of(base), schema_of(final)
    if before != after and not statements:
        raise LandConflictError(
            f"the plan changed the database's schema ({_objects(after ^ before)}) without a "
            "CREATE, ALTER or DROP statement of its own (a function running DDL?), so it "
            "cannot be landed"
        )
    base_tables, final_tables = read_tables(base), read_tables(final)
    landing = Plan([], {}, list(statements))
    if statements:
        landing.schema = after
    for name, was in base_tables.items():
        if name not in final_tables or final_tables[name].columns != was.columns:
            landing.replaced[name] = was
    for name, table in final_tables.items():
        old = base_tables.get(name)
        if old is None or old.columns != table.columns:
            landing.rebuilt[name] = table
            continue
        landing.changes.append(_diff(table, old))
    base_sequences, final_sequences = sequences(base), sequences(final)
    landing.sequences = {
        name: value for name, value in final_sequences.items() if base_sequences.get(name) != value
    }
    return landing


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


def _target_rows(
    connection: psycopg.Connection[tuple[object, ...]], table: Table, keys: list[Row]
) -> dict[Row, Row]:
    """The target's rows at ``keys``, locked, in one query (keys compared as text)."""
    names = [column.name for column in table.columns]
    positions = [names.index(column) for column in table.key]
    labels = [sql.Identifier(f"k{i}") for i in range(len(table.key))]
    query = sql.SQL(
        "SELECT {} FROM {} WHERE ({}) IN (SELECT {} FROM unnest({}) AS k({})) FOR UPDATE"
    ).format(
        _as_text(names),
        _ident(table.name),
        _as_text(table.key),
        sql.SQL(", ").join(labels),
        sql.SQL(", ").join(sql.SQL("%s::text[]") for _ in table.key),
        sql.SQL(", ").join(labels),
    )
    columns = [[key[i] for key in keys] for i in range(len(table.key))]
    found: dict[Row, Row] = {}
    for values in connection.execute(query, columns).fetchall():
        row: Row = tuple(None if v is None else str(v) for v in values)
        found[tuple(row[i] for i in positions)] = row
    return found


def _target_bag(connection: psycopg.Connection[tuple[object, ...]], table: Table) -> Counter[Row]:
    query = sql.SQL("SELECT {} FROM {} FOR UPDATE").format(
        _as_text(c.name for c in table.columns), _ident(table.name)
    )
    return Counter(
        tuple(None if v is None else str(v) for v in row)
        for row in connection.execute(query).fetchall()
    )


def _whole(
    connection: psycopg.Connection[tuple[object, ...]], table: Table
) -> tuple[dict[Row, Row], Counter[Row]] | None:
    """Every row of ``table`` in the target (locked), as :func:`read_tables` keys them; None
    when the target has no such table or other columns."""
    present = read_tables(connection, {table.name}).get(table.name)
    if present is None or present.columns != table.columns:
        return None
    connection.execute(sql.SQL("SELECT 1 FROM {} FOR UPDATE").format(_ident(table.name)))
    return present.rows, present.bag


def _differs(
    connection: psycopg.Connection[tuple[object, ...]], landing: Plan, final: bool
) -> str | None:
    """None when the target holds the base (or, with ``final``, the final) version of
    everything the plan changes; else the first thing that differs. Locks those rows."""
    for change in landing.changes:
        if change.empty:
            continue
        table = change.table
        if change.changed:
            expected = table if final else change.base
            present = _target_rows(connection, table, change.changed)
            for key in change.changed:
                if present.get(key) != expected.rows.get(key):
                    shown = key[0] if len(key) == 1 else key
                    return f"row {shown} of table {table.label} changed"
            continue
        # Without a key, what is checked is that the rows to delete (or, landed, the rows
        # added) are there.
        if (change.added if final else change.removed) - _target_bag(connection, table):
            return f"rows of table {table.label} (it has no primary key) changed"
    for table in (landing.rebuilt if final else landing.replaced).values():
        if _whole(connection, table) != (table.rows, table.bag):
            return f"rows of table {table.label} changed"
    if final and landing.schema and schema_of(connection) != landing.schema:
        return "its schema is not the plan's"
    if final:
        for name, value in landing.sequences.items():
            query = sql.SQL("SELECT last_value, is_called FROM {}").format(_ident(name))
            row = connection.execute(query).fetchone()
            if row is None or _next((int(str(row[0])), bool(row[1]))) < _next(value):
                return f"sequence {_label(name)} is behind"
    return None


def _same_shape(connection: psycopg.Connection[tuple[object, ...]], landing: Plan) -> str | None:
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
                    _ident(name), sql.Identifier(str(trigger))
                )
            )
            disabled.append((name, str(trigger), str(mode)))
    yield
    for name, trigger, mode in disabled:
        how = sql.SQL("ENABLE ALWAYS TRIGGER" if mode == "A" else "ENABLE TRIGGER")
        connection.execute(
            sql.SQL("ALTER TABLE {} {} {}").format(_ident(name), how, sql.Identifier(trigger))
        )


def _insert(
    connection: psycopg.Connection[tuple[object, ...]], table: Table, rows: list[Row]
) -> int:
    """Insert ``rows`` (full rows of ``table``) in one pipelined batch; returns how many."""
    writable = [i for i, column in enumerate(table.columns) if column.writable]
    query = sql.SQL("INSERT INTO {} ({}) OVERRIDING SYSTEM VALUE VALUES ({})").format(
        _ident(table.name),
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
    connection.execute(query.format(_ident(table.name), matches), row)


def _write(connection: psycopg.Connection[tuple[object, ...]], landing: Plan) -> int:
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
                query = sql.SQL("DELETE FROM {} WHERE {}").format(_ident(name), _where(table))
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
                    _ident(name),
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
        ).format(_ident(name))
        qualified = _ident(name).as_string(connection)
        connection.execute(query, (qualified, value[0], value[1], _next(value)))
    return written


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
            shape = _same_shape(target, landing)
            conflict = shape or _differs(target, landing, final=False)
            if conflict is not None:
                if _differs(target, landing, final=True) is None:
                    raise _AlreadyLanded
                if shape is not None:
                    raise LandConflictError(f"the real database changed its schema: {shape}")
                raise LandConflictError(
                    "the real database changed where the plan changed it since the sandbox "
                    f"was made: {conflict}"
                )
            _run_schema_statements(target, landing)
            written = _write(target, landing)
            failpoints.hit("postgres.land", "commit")  # a crash here: nothing landed
    except _AlreadyLanded:
        return Landed(0, already=True)
    failpoints.hit("postgres.land", "committed")  # here: landed, the sandbox not told
    return Landed(written, already=False)


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
            f"sandbox ({_objects(got ^ landing.schema)})"
        )
    left = read_tables(connection, set(landing.rebuilt))
    for name, table in landing.rebuilt.items():
        landing.changes.append(_diff(table, left[name]))


class _AlreadyLanded(Exception):
    """Leaves the landing transaction (rolled back: nothing to write)."""
