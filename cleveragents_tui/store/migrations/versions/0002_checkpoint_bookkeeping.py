"""Checkpoint bookkeeping: refs of a group being created, and pruned checkpoints.

``checkpoint_groups.pending_refs`` lists (resource, ref) pairs made so far while a group is
``pending``, so start-up recovery can drop them after a crash. ``checkpoint_metadata.pruned_at``
marks a checkpoint removed by the budget: the row stays, so a pruned resource is never
mistaken for an unmodified one.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from cleveragents_tui.store.types import UtcDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("checkpoint_groups") as batch:
        batch.add_column(sa.Column("pending_refs", sa.Text(), nullable=False, server_default="[]"))
    with op.batch_alter_table("checkpoint_metadata") as batch:
        batch.add_column(sa.Column("pruned_at", UtcDateTime()))
