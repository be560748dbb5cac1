"""A model call's cost in its own column of events, and an index of every plan's (issue 22).

``events.cost_usd``: the ``cost_usd`` of a ``model_usage`` event's payload (NULL for other
events, and for a cost that is not a JSON number: it counts 0, as before); and
``ix_events_model_cost`` of the ``model_usage`` rows' (kind, cost_usd), partial: no other
event is in it; the kind too, as SQLite reads only the index for a query whose every
column is in it. ``safety.max_total_cost`` is checked before every step and tool call of a
running plan against every plan's calls: summing the payloads' JSON in SQL still parsed
each one (16 ms at 10,000 calls on SQLite, 75 ms on PostgreSQL); the index's column sums
without reading the events. The costs recorded before are copied from their payloads.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

WHERE = "kind = 'model_usage'"
# Each model call's cost copied from its payload (JSON text) when it is a JSON number.
COPY_COSTS = {
    "sqlite": (
        "UPDATE events SET cost_usd = CASE WHEN json_type(payload, '$.cost_usd') IN "
        "('integer', 'real') THEN json_extract(payload, '$.cost_usd') END "
        "WHERE kind = 'model_usage'"
    ),
    "postgresql": (
        "UPDATE events SET cost_usd = CASE WHEN json_typeof(payload::json -> 'cost_usd') = "
        "'number' THEN (payload::json ->> 'cost_usd')::double precision END "
        "WHERE kind = 'model_usage'"
    ),
}


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("cost_usd", sa.Float(), nullable=True))
    op.execute(COPY_COSTS[op.get_bind().dialect.name])
    where = sa.text(WHERE)
    op.create_index(
        "ix_events_model_cost",
        "events",
        ["kind", "cost_usd"],
        sqlite_where=where,
        postgresql_where=where,
    )


def downgrade() -> None:
    op.drop_index("ix_events_model_cost", "events")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("cost_usd")
