"""``agents resource add/list/show/remove``: the real things plans may change."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cleveragents_tui.cli.context import (
    CliContext,
    Listing,
    echo,
    echo_json,
    format_option,
    list_command,
    pass_cli,
)

# engine.resource_registry.KINDS, spelled out so `--help` needs no engine (a test checks).
KINDS_METAVAR = "git|filesystem|database|external"

if TYPE_CHECKING:  # imported when a command runs, not when the CLI starts
    from cleveragents_tui.domain.resource import Resource


def _document(resource: Resource) -> dict[str, object]:
    return {
        "resource_id": resource.resource_id,
        "kind": resource.kind,
        "location": resource.shown_location,
        "sandbox_strategy": resource.sandbox_strategy.value,
        "checkpoint_enabled": resource.checkpoint_enabled,
        "checkpoint_max_per_plan": resource.checkpoint_max_per_plan,
        "created_at": resource.created_at.isoformat(),
    }


def _checkpoints(resource: Resource) -> str:
    if not resource.checkpoint_enabled:
        return "checkpoints off"
    return f"checkpoints on, at most {resource.checkpoint_max_per_plan} per plan"


@click.group()
def resource() -> None:
    """Register the repositories, folders and databases plans may change.

    \b
      agents resource add docs --kind filesystem --location ./docs
      agents resource add app-db --kind database --location ./app.db
      agents resource add shop --kind database --location postgresql://me@db/shop
      agents resource list
    """


@resource.command()
@click.argument("name")
@click.option(
    "--kind",
    required=True,
    metavar=KINDS_METAVAR,
    help="git (a repository), filesystem (a folder), database (a SQLite file or a "
    "postgresql:// URL), external (anything else: changes are real).",
)
@click.option(
    "--location", required=True, metavar="PATH_OR_URL", help="Where it is: a path or a URL."
)
@click.option(
    "--strategy",
    metavar="STRATEGY",
    help="Sandbox strategy (default by kind: git_worktree, filesystem_copy, "
    "transaction_rollback, none; docs/sandboxes.md).",
)
@click.option(
    "--no-checkpoints",
    "no_checkpoints",
    is_flag=True,
    help="No checkpoint at each Execute decision (corrections then roll back whole phases).",
)
@click.option(
    "--max-checkpoints",
    type=click.IntRange(2, 10_000),
    metavar="N",
    help="Checkpoints kept per plan (default: sandbox.checkpoint.max-per-plan, else 50).",
)
@pass_cli
def add(
    cli: CliContext,
    name: str,
    kind: str,
    location: str,
    strategy: str | None,
    no_checkpoints: bool,
    max_checkpoints: int | None,
) -> None:
    """Register NAME (NAME alone means local/NAME). Everything is checked first: the kind,
    that the location is there (a repository with a commit, a database that answers), and
    that it is neither the app's own data nor inside another resource. The resource itself
    is only read."""
    from cleveragents_tui.engine.setup import resource_registry as registry
    from cleveragents_tui.engine.setup.tracked_notes import tracked_notes

    added = registry.add_resource(
        cli.store,
        name,
        kind=kind,
        location=location,
        strategy=strategy,
        checkpoints=False if no_checkpoints else None,
        max_checkpoints=max_checkpoints,
    )
    echo(
        f"resource {added.resource_id} added: {added.kind} at {added.shown_location}, "
        f"{added.sandbox_strategy.value}, {_checkpoints(added)}"
    )
    for note in tracked_notes(cli.store, added):
        echo(f"note: {note}", err=True)


@list_command(resource)
def list_(cli: CliContext) -> Listing[Resource]:
    """Every registered resource."""
    from cleveragents_tui.domain.documents import ResourcesDocument
    from cleveragents_tui.engine.setup import resource_registry as registry

    return Listing(
        registry.list_resources(cli.store),
        lambda items: ResourcesDocument(resources=[_document(r) for r in items]).dump(),
        "No resources. Register one: agents init (in a git repository) or agents resource add",
        lambda r: (
            f"{r.resource_id:<32} {r.kind:<10} {r.sandbox_strategy.value:<20} {r.shown_location}"
        ),
    )


@resource.command()
@click.argument("name")
@format_option
@pass_cli
def show(cli: CliContext, name: str, local_format: str | None) -> None:
    """One resource: where it is, its sandbox and checkpoints, the plans and actions that
    use it."""
    from cleveragents_tui.domain.documents import ResourceDocument
    from cleveragents_tui.engine.setup import resource_registry as registry

    found = registry.get_resource(cli.store, name)
    uses = registry.resource_uses(cli.store, found.resource_id)
    actions = registry.actions_naming(cli.store, found.resource_id)
    if cli.wants_json(local_format):
        echo_json(
            ResourceDocument.model_validate(
                {
                    **_document(found),
                    "plans": [{"plan_id": u.plan_id, "state": u.state.value} for u in uses],
                    "actions": actions,
                }
            ).dump()
        )
        return
    echo(f"resource {found.resource_id}")
    echo(f"  kind       {found.kind}")
    echo(f"  location   {found.shown_location}")
    echo(f"  sandbox    {found.sandbox_strategy.value}")
    echo(f"  {_checkpoints(found)}")
    echo(f"  plans      {', '.join(f'{u.plan_id} ({u.state.value})' for u in uses) or 'none'}")
    echo(f"  actions    {', '.join(actions) or 'none'}")


@resource.command()
@click.argument("name")
@pass_cli
def remove(cli: CliContext, name: str) -> None:
    """Unregister NAME; refused while a plan that is not finished uses it. The resource
    itself is not touched. Plans that used it keep naming it in their history."""
    from cleveragents_tui.engine.setup import resource_registry as registry

    resource_id = registry.resource_name(name)
    deleted = registry.remove_resource(cli.store, name)
    echo(
        f"resource {resource_id} removed"
        + ("" if deleted else " (kept in the history of the plans that used it)")
    )
