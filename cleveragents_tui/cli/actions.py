"""``agents action create/validate/list/show``: action files, checked and registered."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from cleveragents_tui.cli.context import (
    CliContext,
    Listing,
    echo,
    echo_json,
    format_option,
    json_text,
    list_command,
    pass_cli,
)
from cleveragents_tui.domain.errors import UserError

if TYPE_CHECKING:  # imported when a command runs, not when the CLI starts
    from cleveragents_tui.store.action_repository import StoredAction

_PATH = click.Path(path_type=Path, dir_okay=False)


@click.group()
def action() -> None:
    """Check and register action files (docs/actions.md).

    \b
      agents action validate FILE       every problem of FILE, with its line
      agents action create FILE         check FILE and register its action
      agents plan use NAME              run a registered action
    """


@action.command()
@click.argument("path", metavar="FILE", type=_PATH)
@format_option
@pass_cli
def validate(cli: CliContext, path: Path, local_format: str | None) -> None:
    """Check FILE as `action create` would, and report every problem at once, each with its
    line: YAML, the schema, the decision points' rules, and the resources, tools,
    validations, actors and profile it names. Exit 2 when there is any."""
    from cleveragents_tui.domain.documents import ActionCheckDocument
    from cleveragents_tui.engine.setup import action_registry as registry

    checked = registry.check_action_file(cli.store, path)
    if cli.wants_json(local_format):
        echo_json(
            ActionCheckDocument(
                file=str(path),
                action=checked.action.name if checked.action else None,
                problems=[
                    {"line": p.line, "where": p.where, "message": p.message}
                    for p in checked.problems
                ],
            ).dump()
        )
    elif checked.action is not None:
        echo(f"{path}: ok, action {checked.action.name}")
    else:
        for line in registry.describe_problems(checked):
            echo(line, err=True)
    if checked.problems:
        count = len(checked.problems)
        raise UserError(f"{count} problem{'s' if count > 1 else ''} in {path}", registry.FIX)


@action.command()
@click.argument("path", metavar="FILE", type=_PATH)
@click.option(
    "--automation-profile",
    "profile",
    metavar="PROFILE",
    help="Action-level profile (plan > action > project > global).",
)
@click.option("--replace", is_flag=True, help="Replace the registered action of that name.")
@pass_cli
def create(cli: CliContext, path: Path, profile: str | None, replace: bool) -> None:
    """Check FILE and register its action, so `agents plan use NAME` runs it. The whole
    definition is stored: later edits of FILE need `create --replace`. Nothing is stored
    if the file has any problem (`agents action validate FILE` lists them all)."""
    from cleveragents_tui.engine.setup import action_registry as registry

    created, new = registry.create_action(cli.store, path, profile=profile, replace=replace)
    echo(
        f"action {created.name} {'registered' if new else 'replaced'} "
        f"({len(created.decisions)} decision points, resources: "
        f"{', '.join(created.resources) or 'none'})"
    )
    echo(f"run it: agents plan use {created.name}")


@list_command(action)
def list_(cli: CliContext) -> Listing[StoredAction]:
    """Every registered action."""
    from cleveragents_tui.domain.documents import ActionsDocument
    from cleveragents_tui.engine.setup import action_registry as registry

    return Listing(
        registry.registered_actions(cli.store),
        lambda items: ActionsDocument(
            actions=[
                {
                    "name": a.name,
                    "source": a.source,
                    "description": a.definition.get("description"),
                    "updated_at": a.updated_at.isoformat(),
                }
                for a in items
            ],
        ).dump(),
        "No actions registered. Register one: agents action create FILE",
        lambda a: f"{a.name:<40} {a.definition.get('description') or ''}",
    )


@action.command()
@click.argument("name")
@format_option
@pass_cli
def show(cli: CliContext, name: str, local_format: str | None) -> None:
    """A registered action: where it came from and its whole stored definition."""
    from cleveragents_tui.domain.documents import ActionDocument
    from cleveragents_tui.engine.setup import action_registry as registry

    stored = registry.registered_action(cli.store, name)
    if cli.wants_json(local_format):
        echo_json(
            ActionDocument(
                name=stored.name,
                source=stored.source,
                updated_at=stored.updated_at.isoformat(),
                definition=stored.definition,
            ).dump()
        )
        return
    echo(f"action {stored.name}")
    echo(f"  from       {stored.source or '-'}")
    echo(f"  registered {stored.updated_at.isoformat()}")
    echo(json_text(stored.definition))
