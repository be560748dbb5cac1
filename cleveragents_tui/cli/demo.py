"""``agents demo-data``: load the bundled sample plan."""

from __future__ import annotations

import click

from cleveragents_tui.cli import json_output, render
from cleveragents_tui.cli.context import CliContext, echo, echo_json, pass_cli


@click.command("demo-data")
@pass_cli
def demo_data_command(cli: CliContext) -> None:
    """Load a realistic sample plan (with a correction and a child plan) and print its tree.

    Each run adds a new copy with fresh ids; nothing already stored is changed.
    """
    from cleveragents_tui.engine import browse
    from cleveragents_tui.engine.demo_data import load_sample_plan
    from cleveragents_tui.export.json import plan_tree_document

    plan_id = load_sample_plan(cli.store)
    tree = browse.plan_tree(cli.store, plan_id, show_superseded=True)
    if json_output.wanted():
        echo_json({**plan_tree_document(tree), "format": json_output.SAMPLE_FORMAT})
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
