"""Schema versions: check on open (cheap, no Alembic import), upgrade with Alembic."""

from __future__ import annotations

from sqlalchemy import Engine, inspect, text
from sqlalchemy.exc import DBAPIError

from cleveragents_tui.domain.errors import DatabaseUnavailableError

# The newest migration in migrations/versions; tests check it matches Alembic's head.
SCHEMA_HEAD = "0013"
KNOWN_REVISIONS = (
    "0001",
    "0002",
    "0003",
    "0004",
    "0005",
    "0006",
    "0007",
    "0008",
    "0009",
    "0010",
    "0011",
    "0012",
    "0013",
)


def current_revision(engine: Engine) -> str | None:
    """The database's Alembic revision, or None when it has never been migrated."""
    with engine.connect() as connection:
        try:
            row = connection.execute(text("SELECT version_num FROM alembic_version")).first()
        except DBAPIError:
            connection.rollback()
            return None
    return None if row is None else str(row[0])


def upgrade(engine: Engine) -> tuple[str | None, str]:
    """Apply every pending migration; returns (revision before, revision after)."""
    from alembic import command
    from alembic.config import Config

    before = current_revision(engine)
    config = Config()
    config.set_main_option("script_location", "cleveragents_tui.store:migrations")
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return before, SCHEMA_HEAD


def ensure_schema(engine: Engine) -> None:
    """Make the database usable: migrate an empty one, refuse a foreign or outdated one."""
    revision = current_revision(engine)
    if revision == SCHEMA_HEAD:
        return
    if revision is None:
        if inspect(engine).get_table_names():
            raise DatabaseUnavailableError(
                f"{engine.url.render_as_string()} holds tables but no cleveragents schema",
                "point --db at an empty database or an agents database",
            )
        upgrade(engine)
        return
    if revision in KNOWN_REVISIONS:
        raise DatabaseUnavailableError(
            f"the database schema is at revision {revision}, this version needs {SCHEMA_HEAD}",
            "back it up, then run `agents db upgrade`",
        )
    raise DatabaseUnavailableError(
        f"the database schema revision {revision} is newer than this version knows",
        "upgrade cleveragents-tui",
    )
