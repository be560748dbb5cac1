"""What landing changes, worked out from a sandbox's two copies before the target is read.

The tables whose rows differ (by primary key, or as a multiset without one), the tables
the plan's schema statements created, reshaped or dropped, and the sequences it advanced.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg

from cleveragents_tui.sandbox.landing import LandConflictError
from cleveragents_tui.sandbox.postgres_copy.catalog import (
    Name,
    Row,
    Table,
    read_tables,
    schema_of,
    sequences,
)


@dataclass
class TableChange:
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

    changes: list[TableChange]
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


def objects(lines: set[str]) -> str:
    what = sorted({_object(line) for line in lines})
    return ", ".join(what[:3]) + (f" and {len(what) - 3} more" if len(what) > 3 else "")


def diff_table(table: Table, old: Table) -> TableChange:
    """What differs between two versions of one table with the same columns."""
    if table.key:
        keys = table.rows.keys() | old.rows.keys()
        changed = sorted(
            (k for k in keys if table.rows.get(k) != old.rows.get(k)),
            key=lambda k: tuple("" if v is None else v for v in k),
        )
        return TableChange(table, old, changed, Counter(), Counter())
    return TableChange(table, old, [], old.bag - table.bag, table.bag - old.bag)


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
            f"the plan changed the database's schema ({objects(after ^ before)}) without a "
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
        landing.changes.append(diff_table(table, old))
    base_sequences, final_sequences = sequences(base), sequences(final)
    landing.sequences = {
        name: value for name, value in final_sequences.items() if base_sequences.get(name) != value
    }
    return landing
