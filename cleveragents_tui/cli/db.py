"""``agents db ...``: the database schema."""

from __future__ import annotations

import click

from cleveragents_tui.cli import json_output
from cleveragents_tui.cli.context import CliContext, echo, echo_json, pass_cli


@click.group()
def db() -> None:
    """Manage the database schema (Alembic migrations)."""


@db.command()
@pass_cli
def upgrade(cli: CliContext) -> None:
    """Apply pending migrations. Back the database up first; migrations only move forward."""
    from cleveragents_tui.domain.documents import SchemaDocument
    from cleveragents_tui.engine.ops import maintenance

    url, before, after = maintenance.upgrade_database(cli.db_url)
    if json_output.wanted():
        echo_json(
            SchemaDocument.model_validate({"database": url, "from": before, "to": after}).dump()
        )
    elif before == after:
        echo(f"{url}: schema already at revision {after}")
    else:
        echo(f"{url}: schema upgraded from {before or 'empty'} to revision {after}")
