"""``agents demo``: build a demo project and run its plan; ``agents demo-data``: load the
bundled sample plan."""

from __future__ import annotations

import getpass
import sys
import tempfile
from pathlib import Path

import click

from cleveragents_tui.cli import json_output, render
from cleveragents_tui.cli.context import CliContext, echo, echo_json, format_option, pass_cli
from cleveragents_tui.cli.outcome import report_plan
from cleveragents_tui.cli.progress import following, progress_option


@click.command("demo-data")
@pass_cli
def demo_data_command(cli: CliContext) -> None:
    """Load a realistic sample plan (with a correction and a child plan) and print its tree.

    Each run adds a new copy with fresh ids; nothing already stored is changed.
    """
    from cleveragents_tui.domain.documents import SamplePlanDocument
    from cleveragents_tui.engine.demo.demo_data import load_sample_plan
    from cleveragents_tui.engine.read import browse
    from cleveragents_tui.export.json import plan_tree_document

    plan_id = load_sample_plan(cli.store)
    tree = browse.plan_tree(cli.store, plan_id, show_superseded=True)
    if json_output.wanted():
        echo_json(plan_tree_document(tree, SamplePlanDocument))
        return
    echo(f"Loaded sample plan {plan_id} into the database.\n")
    echo(render.plan_tree(tree))
    pick = next(
        (
            line.row.decision_id
            for line in tree.lines
            if line.row.decision_type == "implementation_choice" and line.row.superseded_by is None
        ),
        plan_id,
    )
    echo(
        "\nNext:\n"
        "  agents plan list\n"
        f"  agents plan show {plan_id}\n"
        f"  agents plan explain {pick}\n"
        f"  agents plan tree {plan_id} --format=json"
    )


@click.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    help="Where to build the demo (a new or empty folder).",
)
@click.option(
    "--automation-profile",
    "profile",
    default="auto",
    show_default=True,
    help="Profile of the demo plan; `auto` runs it to the Apply gate.",
)
@click.option(
    "--no-tui",
    is_flag=True,
    help="Do not open the app afterwards (it opens only when stdout is a terminal).",
)
@format_option
@progress_option
@pass_cli
def demo(
    cli: CliContext, directory: Path | None, profile: str, no_tui: bool, local_format: str | None
) -> None:
    """Build a demo project (git repository, SQLite app database, docs, team chat outbox),
    run the demo plan on it to the Apply gate, and open the app on it (unless --no-tui,
    --format=json, or stdout is not a terminal: then say what to do next)."""
    from cleveragents_tui.domain.documents import DemoDocument
    from cleveragents_tui.engine import RunOptions, start_plan
    from cleveragents_tui.engine.demo.demo import build_demo
    from cleveragents_tui.engine.setup.actions import load_action

    target = directory or Path(tempfile.mkdtemp(prefix="agents-demo-"))
    environment = build_demo(cli.store, target)
    if not cli.wants_json(local_format):
        echo(
            f"Demo project in {environment.directory} (resources {environment.namespace}/...). Running the plan..."
        )
    with following(cli) as progress:
        result = start_plan(
            cli.store,
            load_action(str(environment.action_file)),
            profile_override=profile,
            options=RunOptions(user=getpass.getuser(), on_start=progress.follow),
        )
    if cli.wants_json(local_format):
        echo_json(
            DemoDocument(
                plan_id=result.plan_id,
                phase=result.phase.value,
                state=result.state.value,
                directory=str(environment.directory),
                action_file=str(environment.action_file),
                database_url=cli.store.engine.url.render_as_string(),
                app_database=str(environment.database),
            ).dump()
        )
        return
    report_plan(cli.store, result)
    echo(
        "\nNext:\n"
        f"  agents plan tree {result.plan_id}\n"
        f"  agents plan explain DECISION\n"
        f'  agents plan correct DECISION --mode=revert --guidance "..." --dry-run\n'
        + _then(cli, result.plan_id)
    )
    if not no_tui and sys.stdout.isatty():
        from cleveragents_tui.cli.tui import launch

        launch(cli, result.plan_id, None)


def _then(cli: CliContext, plan_id: str) -> str:
    """The last step to suggest: land the plan at its Apply gate; at any other gate (a
    supervised profile's), answer it and go on."""
    from cleveragents_tui.engine import pending_approvals

    kinds = {a.kind.value for a in pending_approvals(cli.store, plan_id, family=True)}
    if "apply_gate" in kinds or not kinds:
        steps = [
            (f"agents plan apply {plan_id} --dry-run", "what it would land, changing nothing"),
            (f"agents plan apply {plan_id}", "land it on the demo's real files and database"),
        ]
    else:
        steps = [
            ("agents approval list", "answer what it waits for (approve or deny)"),
            (f"agents plan run {plan_id}", "then go on to the next gate"),
        ]
    width = max(len(command) for command, _ in steps)
    return "".join(f"  {command:<{width}}  # {why}\n" for command, why in steps)
