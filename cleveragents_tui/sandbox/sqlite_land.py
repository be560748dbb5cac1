"""Landing a SQLite sandbox: the difference between two copies, written into the real file.

A ``sqlite_copy`` sandbox (``sqlite_copy.py``) keeps the database as it was at creation
(``baseline``) and as the plan left it (``final``). Apply does not re-run anything: it
writes the rows and schema objects that differ between the two into the target in one
``BEGIN IMMEDIATE`` transaction, so what lands is exactly what the plan produced, values of
``now()``, ``random()``, triggers and AUTOINCREMENT included.

* Rows are matched by ``rowid`` (by primary key in a ``WITHOUT ROWID`` table). A row that
  changed is deleted and inserted again with the final values, with its rowid.
* Triggers are dropped first and created again last (from the final copy), so landing
  the rows does not fire them a second time: their effects are already in the final rows.
* Tables, indexes and views created, dropped or redefined by the plan are made to match
  the final copy: a redefined table is dropped, created from the final definition and
  filled with its final rows. ``PRAGMA user_version`` follows the final copy, and
  ``sqlite_sequence`` keeps the larger counter of the target and the final copy.
* Foreign keys are not enforced while landing (the final copy satisfied them already).
* Conflicts: before writing, every row and schema object the plan changed must still be as
  it was at the baseline in the target. Rows the plan did not touch may have changed
  meanwhile; they are kept. A conflict, or any error, rolls the transaction back and raises:
  nothing is half-landed. A target that already holds the final values of every change
  (an Apply that committed, then died before recording it) counts as landed.
* Virtual tables are refused: their storage belongs to their module.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cleveragents_tui import failpoints
from cleveragents_tui.sandbox.landing import LandConflictError, Landed
from cleveragents_tui.sandbox.sql_confinement import confine_sqlite

BUSY_TIMEOUT_S = 10.0
_BASE, _FINAL = "sb_base", "sb_final"
_CHANGED = "the real database changed where the plan changed it since the sandbox was made"


@dataclass
class _TableDiff:
    name: str
    key: tuple[str, ...]  # ("rowid",) or the primary key of a WITHOUT ROWID table
    columns: tuple[str, ...]  # writable columns (generated ones are computed by SQLite)
    changed: list[tuple[Any, ...]] = field(default_factory=list)  # keys whose rows differ


def q(name: str) -> str:
    """An SQL identifier, always quoted (names come from sqlite_master, never from tools)."""
    return '"' + name.replace('"', '""') + '"'


def _objects(connection: sqlite3.Connection, schema: str) -> dict[tuple[str, str], str | None]:
    """(type, name) -> SQL of every schema object but SQLite's own, in creation order."""
    rows = connection.execute(
        f"SELECT type, name, sql FROM {q(schema)}.sqlite_master "  # noqa: S608
        "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY rowid"
    ).fetchall()
    return {(kind, name): sql for kind, name, sql in rows}


def virtual_tables(connection: sqlite3.Connection, schema: str = "main") -> list[str]:
    """Names of the virtual tables in ``schema`` (a copy sandbox cannot land them)."""
    return [
        name
        for (kind, name), sql in _objects(connection, schema).items()
        if kind == "table" and (sql or "").lstrip().upper().startswith("CREATE VIRTUAL")
    ]


def _has_rowid(connection: sqlite3.Connection, schema: str, table: str) -> bool:
    try:
        connection.execute(f"SELECT rowid FROM {q(schema)}.{q(table)} LIMIT 0")  # noqa: S608
    except sqlite3.OperationalError:
        return False
    return True


def _table_shape(
    connection: sqlite3.Connection, schema: str, table: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(key columns, writable columns) of ``table``."""
    info = connection.execute(f"PRAGMA {q(schema)}.table_xinfo({q(table)})").fetchall()
    columns = tuple(row[1] for row in info if row[6] == 0)
    if _has_rowid(connection, schema, table):
        return ("rowid",), columns
    key = tuple(row[1] for row in sorted(info, key=lambda r: r[5]) if row[5] > 0)
    return key, columns


def _select(schema: str, diff: _TableDiff) -> str:
    key = ", ".join(q(k) if k != "rowid" else "rowid" for k in diff.key)
    cols = ", ".join(q(c) for c in diff.columns)
    return f"SELECT {key}, {cols} FROM {q(schema)}.{q(diff.name)}"  # noqa: S608


def _column_list(diff: _TableDiff) -> str:
    """The key (when it is the rowid) and the writable columns, for INSERT ... SELECT."""
    rowid = ["rowid"] if diff.key == ("rowid",) else []
    return ", ".join([*rowid, *(q(c) for c in diff.columns)])


def _where(diff: _TableDiff) -> str:
    return " AND ".join(f"{q(k) if k != 'rowid' else 'rowid'} = ?" for k in diff.key)


def _changed_keys(connection: sqlite3.Connection, diff: _TableDiff) -> list[tuple[Any, ...]]:
    width = len(diff.key)
    base, final = _select(_BASE, diff), _select(_FINAL, diff)
    keys: set[tuple[Any, ...]] = set()
    for sql in (f"{final} EXCEPT {base}", f"{base} EXCEPT {final}"):
        keys.update(tuple(row[:width]) for row in connection.execute(sql))
    return sorted(keys, key=repr)


def _row(
    connection: sqlite3.Connection, schema: str, diff: _TableDiff, key: tuple[Any, ...]
) -> tuple[Any, ...] | None:
    row = connection.execute(f"{_select(schema, diff)} WHERE {_where(diff)}", key).fetchone()
    return None if row is None else tuple(row)


def _all_rows(connection: sqlite3.Connection, schema: str, table: str) -> list[tuple[Any, ...]]:
    key = "rowid, " if _has_rowid(connection, schema, table) else ""
    sql = f"SELECT {key}* FROM {q(schema)}.{q(table)}"  # noqa: S608
    return sorted((tuple(row) for row in connection.execute(sql)), key=repr)


@dataclass
class _Plan:
    """What landing changes, worked out from the two copies before the target is read."""

    base: dict[tuple[str, str], str | None]
    final: dict[tuple[str, str], str | None]
    rows: list[_TableDiff]
    rebuilt: list[str]  # tables created or redefined: made anew from the final copy
    dropped: list[str]
    user_version: tuple[int, int]

    @property
    def empty(self) -> bool:
        return (
            self.base == self.final
            and not any(diff.changed for diff in self.rows)
            and self.user_version[0] == self.user_version[1]
        )


def _plan(connection: sqlite3.Connection) -> _Plan:
    base, final = _objects(connection, _BASE), _objects(connection, _FINAL)
    virtual = virtual_tables(connection, _FINAL)
    if virtual:
        raise LandConflictError(
            f"the plan's database has virtual tables ({', '.join(virtual)}), which cannot "
            "be landed row by row"
        )
    rows: list[_TableDiff] = []
    rebuilt: list[str] = []
    for kind, name in final:
        if kind != "table":
            continue
        if base.get((kind, name), "") != final[(kind, name)]:
            rebuilt.append(name)
            continue
        key, columns = _table_shape(connection, _FINAL, name)
        diff = _TableDiff(name, key, columns)
        diff.changed = _changed_keys(connection, diff)
        rows.append(diff)
    dropped = [name for kind, name in base if kind == "table" and (kind, name) not in final]
    versions = tuple(
        int(connection.execute(f"PRAGMA {schema}.user_version").fetchone()[0])
        for schema in (_BASE, _FINAL)
    )
    return _Plan(base, final, rows, rebuilt, dropped, (versions[0], versions[1]))


def _state_of(connection: sqlite3.Connection, plan: _Plan, schema: str) -> str | None:
    """None when the target holds ``schema``'s version of everything the plan changes,
    else the first thing that differs."""
    target = _objects(connection, "main")
    for key in plan.base.keys() | plan.final.keys():
        if target.get(key) != (plan.base if schema == _BASE else plan.final).get(key):
            return f"the {key[0]} {key[1]} is defined differently"
    for name in plan.rebuilt + plan.dropped:
        if (
            ("table", name) in plan.base if schema == _BASE else ("table", name) in plan.final
        ) and (_all_rows(connection, "main", name) != _all_rows(connection, schema, name)):
            return f"rows of table {name} differ"
    for diff in plan.rows:
        for key in diff.changed:
            if _row(connection, "main", diff, key) != _row(connection, schema, diff, key):
                return f"row {key} of table {diff.name} changed"
    index = 0 if schema == _BASE else 1
    if (
        int(connection.execute("PRAGMA main.user_version").fetchone()[0])
        != plan.user_version[index]
    ):
        return "PRAGMA user_version changed"
    return None


def _write(connection: sqlite3.Connection, plan: _Plan) -> int:
    """Make the target match the final copy where the plan changed it; returns rows written."""
    changed_objects = {
        key
        for key in plan.base.keys() | plan.final.keys()
        if plan.base.get(key) != plan.final.get(key)
    }
    for (kind, name), _sql in plan.base.items():
        # Every trigger goes (and comes back last); other objects only when the plan changed them.
        if kind == "trigger" or ((kind, name) in changed_objects and kind in ("index", "view")):
            connection.execute(f"DROP {kind.upper()} IF EXISTS main.{q(name)}")
    for name in plan.dropped + [n for n in plan.rebuilt if ("table", n) in plan.base]:
        connection.execute(f"DROP TABLE main.{q(name)}")
    tables = dict(
        connection.execute(
            f"SELECT name, tbl_name FROM {_FINAL}.sqlite_master WHERE type = 'index'"  # noqa: S608
        ).fetchall()
    )
    rebuilt = set(plan.rebuilt)
    written = 0
    for name in plan.rebuilt:
        sql = plan.final[("table", name)]
        if sql is None:
            raise LandConflictError(f"table {name} has no definition in the plan's database")
        connection.execute(sql)
        key, columns = _table_shape(connection, _FINAL, name)
        cols = _column_list(_TableDiff(name, key, columns))
        cursor = connection.execute(
            f"INSERT INTO main.{q(name)} ({cols}) SELECT {cols} FROM {_FINAL}.{q(name)}"  # noqa: S608
        )
        written += max(cursor.rowcount, 0)
    for diff in plan.rows:
        if not diff.changed:
            continue
        target_cols = _column_list(diff)
        for key in diff.changed:
            connection.execute(
                f"DELETE FROM main.{q(diff.name)} WHERE {_where(diff)}",  # noqa: S608
                key,
            )
            cursor = connection.execute(
                f"INSERT INTO main.{q(diff.name)} ({target_cols}) "  # noqa: S608
                f"SELECT {target_cols} FROM {_FINAL}.{q(diff.name)} WHERE {_where(diff)}",
                key,
            )
            written += max(cursor.rowcount, 0)
    for (kind, name), sql in plan.final.items():
        if sql is None or kind not in ("index", "view"):
            continue
        if (kind, name) in changed_objects or (kind == "index" and tables[name] in rebuilt):
            connection.execute(f"DROP {kind.upper()} IF EXISTS main.{q(name)}")
            connection.execute(sql)
    for (kind, _name), sql in plan.final.items():
        if kind == "trigger" and sql is not None:
            connection.execute(sql)
    _land_sequence(connection)
    if plan.user_version[0] != plan.user_version[1]:
        connection.execute(f"PRAGMA main.user_version = {int(plan.user_version[1])}")
    return written


def _land_sequence(connection: sqlite3.Connection) -> None:
    """AUTOINCREMENT counters: the larger of the target's and the final copy's, so no id is
    handed out twice."""
    exists = connection.execute(
        f"SELECT 1 FROM {_FINAL}.sqlite_master WHERE name = 'sqlite_sequence'"  # noqa: S608
    ).fetchone()
    if exists is None:
        return
    counters = connection.execute(
        f"SELECT name, seq FROM {_FINAL}.sqlite_sequence"  # noqa: S608
    ).fetchall()
    for name, seq in counters:
        updated = connection.execute(
            "UPDATE main.sqlite_sequence SET seq = max(seq, ?) WHERE name = ?", (seq, name)
        )
        if updated.rowcount == 0:
            connection.execute(
                "INSERT INTO main.sqlite_sequence (name, seq) VALUES (?, ?)", (name, seq)
            )


@contextlib.contextmanager
def _attached(target: Path, baseline: Path, final: Path) -> Iterator[sqlite3.Connection]:
    connection = sqlite3.connect(target, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        connection.execute("PRAGMA foreign_keys = OFF")
        connection.execute(f"ATTACH DATABASE ? AS {_BASE}", (str(baseline),))
        connection.execute(f"ATTACH DATABASE ? AS {_FINAL}", (str(final),))
        confine_sqlite(connection)  # the copies' schema SQL runs here: no further files
        yield connection
    finally:
        connection.close()


def refusal(target: Path, baseline: Path, final: Path) -> str | None:
    """Why :func:`land` would raise LandConflictError now, read only (every file opened
    ``mode=ro``, in one read transaction); None when it would land, or when SQLite cannot
    read a file now (busy, a crash's journal left): then only the real Apply can tell."""
    uri = f"{target.resolve().as_uri()}?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error:
        return None
    try:
        for path, schema in ((baseline, _BASE), (final, _FINAL)):
            connection.execute(
                f"ATTACH DATABASE ? AS {schema}", (f"{path.resolve().as_uri()}?mode=ro",)
            )
        confine_sqlite(connection)
        connection.execute("BEGIN")
        plan = _plan(connection)
        if plan.empty:
            return None
        conflict = _state_of(connection, plan, _BASE)
        if conflict is None or _state_of(connection, plan, _FINAL) is None:
            return None
        return f"{_CHANGED}: {conflict}"
    except LandConflictError as exc:
        return str(exc)
    except sqlite3.Error:
        return None
    finally:
        connection.close()


def land(target: Path, baseline: Path, final: Path) -> Landed:
    """Write into ``target`` what differs between ``baseline`` and ``final``, in one
    transaction. Raises :class:`LandConflictError` (target unchanged) on a conflict, and
    :class:`sqlite3.Error` (target unchanged) when SQLite refuses a write."""
    with _attached(target, baseline, final) as connection:
        connection.execute("BEGIN IMMEDIATE")
        try:
            plan = _plan(connection)
            if plan.empty:
                connection.execute("ROLLBACK")
                return Landed(0, already=False)
            conflict = _state_of(connection, plan, _BASE)
            if conflict is not None:
                if _state_of(connection, plan, _FINAL) is None:
                    connection.execute("ROLLBACK")
                    return Landed(0, already=True)
                raise LandConflictError(f"{_CHANGED}: {conflict}")
            written = _write(connection, plan)
            failpoints.hit("sqlite.land", "commit")  # a crash here: nothing landed
            connection.execute("COMMIT")
            failpoints.hit("sqlite.land", "committed")  # here: landed, the sandbox not told
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return Landed(written, already=False)
