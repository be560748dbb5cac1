"""An index of the calls that wrote something, by plan and the resource they name (issue 22).

``tool_invocations (plan_id, <the call's resource argument>)`` of the calls with side
effects (a partial expression index): a revert's later writers — the plan's writes to the
resources it rolls back — are looked up, instead of read among every write of the plan and
each one's JSON arguments parsed (at 10,000 decisions, half the SQL of a small preview).
The expression is the one ``store/correction_queries.py`` compares (``RESOURCE_OF_CALL``).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

NAME = "ix_tool_invocations_plan_resource_writes"
EXPRESSION = {
    "sqlite": "json_extract(arguments, '$.resource')",
    "postgresql": "(CAST(arguments AS JSONB) ->> 'resource')",
}


def upgrade() -> None:
    expression = EXPRESSION[op.get_bind().dialect.name]
    op.execute(
        f"CREATE INDEX {NAME} ON tool_invocations (plan_id, {expression}) "
        "WHERE side_effects <> '[]'"
    )


def downgrade() -> None:
    op.drop_index(NAME, "tool_invocations")
