"""``agents plan ...``: browse plans and their decision trees."""

from __future__ import annotations

import click

from cleveragents_tui.cli import render
from cleveragents_tui.cli.context import CliContext, echo_json, format_option, pass_cli
from cleveragents_tui.engine import browse
from cleveragents_tui.export import json as export_json


@click.group()
def plan() -> None:
    """Browse plans and their decision trees."""


@plan.command("list")
@format_option
@pass_cli
def list_(cli: CliContext, local_format: str | None) -> None:
    """List every plan, child plans indented under their parent.

    DECISIONS shows current/all (superseded decisions are kept for history).
    """
    summaries = browse.list_plans(cli.store)
    if cli.wants_json(local_format):
        echo_json(export_json.plan_list_document(summaries))
    else:
        click.echo(render.plan_list(summaries))


@plan.command()
@click.argument("plan_ref", metavar="PLAN")
@format_option
@pass_cli
def show(cli: CliContext, plan_ref: str, local_format: str | None) -> None:
    """Show one plan: phase, state, attempt, profile, counts, child plans, corrections."""
    details = browse.show_plan(cli.store, plan_ref)
    if cli.wants_json(local_format):
        echo_json(export_json.plan_document(details))
    else:
        click.echo(render.plan_details(details))


@plan.command()
@click.argument("plan_ref", metavar="PLAN")
@click.option(
    "--show-superseded", is_flag=True, help="Include decisions replaced by corrections (marked ✗)."
)
@format_option
@pass_cli
def tree(cli: CliContext, plan_ref: str, show_superseded: bool, local_format: str | None) -> None:
    """Print the decision tree of PLAN.

    Each line: decision id, tree branch, type, chosen option, confidence, ⟲ when the decision
    has a checkpoint group. ↻ marks a correction, ✗ a superseded decision.
    """
    result = browse.plan_tree(cli.store, plan_ref, show_superseded=show_superseded)
    if cli.wants_json(local_format):
        echo_json(export_json.plan_tree_document(result))
    else:
        click.echo(render.plan_tree(result))


@plan.command()
@click.argument("decision_ref", metavar="DECISION")
@click.option(
    "--plan", "plan_ref", metavar="PLAN", help="Fail unless the decision belongs to this plan."
)
@format_option
@pass_cli
def explain(
    cli: CliContext, decision_ref: str, plan_ref: str | None, local_format: str | None
) -> None:
    """Explain one decision: question, chosen option, alternatives, rationale, confidence,
    downstream impact, tool invocations and checkpoints."""
    explanation = browse.explain_decision(cli.store, decision_ref, plan_ref)
    if cli.wants_json(local_format):
        echo_json(export_json.decision_document(explanation))
    else:
        click.echo(render.decision_explanation(explanation))
