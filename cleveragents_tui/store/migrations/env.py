"""Alembic environment: runs on the connection the caller hands over (see ``store/schema.py``)."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from cleveragents_tui.store.tables import Base

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError("run migrations through `agents db upgrade`, which supplies a connection")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
