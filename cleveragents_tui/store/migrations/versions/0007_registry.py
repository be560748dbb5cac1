"""``actions`` (registered by ``agents action create``) and ``resources.removed_at``.

A registered action is stored whole, so ``agents plan use NAME`` runs exactly what was
validated. A resource that plans have used is never deleted — their trees, checkpoints and
cleanup still name it — so ``agents resource remove`` marks it removed instead.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from cleveragents_tui.store.types import UtcDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "actions",
        sa.Column("name", sa.String(130), primary_key=True),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("source", sa.Text()),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.Column("updated_at", UtcDateTime(), nullable=False),
    )
    with op.batch_alter_table("resources") as batch:
        batch.add_column(sa.Column("removed_at", UtcDateTime()))
