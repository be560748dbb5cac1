"""``agents plan ...``: browse plans and their decision trees."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

import click

from cleveragents_tui.cli import render
from cleveragents_tui.cli.context import (
    CliContext,
    echo,
    echo_either,
    echo_json,
    format_option,
    json_text,
    output_file_options,
    pass_cli,
)
from cleveragents_tui.cli.json_output import refuse_elsewhere
from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.errors import UserError

# The other modules that add `plan` subcommands. They import the correction and run engines,
# so they load only when one of their subcommands, or the whole list, is asked for: `agents
# plan tree` imports neither (docs/benchmarks.md, plan_tree).
MORE_SUBCOMMANDS = ("correct", "lifecycle", "cleanup")


class PlanGroup(click.Group):
    """``plan``, loading the subcommands of :data:`MORE_SUBCOMMANDS` on first need; each
    subcommand refuses the global ``--format=json`` as it is first handed out (where it has
    none), which cli/__init__.py otherwise does for a whole command when it loads it."""

    refuses_json_itself = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._all_loaded = False
        self._refusing: set[str] = set()

    def _load_all(self) -> None:
        if not self._all_loaded:
            self._all_loaded = True
            for module in MORE_SUBCOMMANDS:
                import_module(f"cleveragents_tui.cli.{module}")

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_all()
        return super().list_commands(ctx)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._load_all()
        command = super().get_command(ctx, cmd_name)
        if command is not None and cmd_name not in self._refusing:
            self._refusing.add(cmd_name)
            refuse_elsewhere(command, ("plan", cmd_name))
        return command


@click.group(cls=PlanGroup)
def plan() -> None:
    """Start, run, correct and land plans; browse their decision trees."""


@plan.command("list")
@format_option
@pass_cli
def list_(cli: CliContext, local_format: str | None) -> None:
    """List every plan, child plans indented under their parent.

    DECISIONS shows current/all (superseded decisions are kept for history).
    """
    from cleveragents_tui.engine.read import browse
    from cleveragents_tui.export import json as export_json

    summaries = browse.list_plans(cli.store)
    echo_either(
        cli,
        local_format,
        lambda: export_json.plan_list_document(summaries),
        lambda: render.plan_list(summaries),
    )
    if summaries and not cli.wants_json(local_format):
        from cleveragents_tui.cli.outcome import echo_ready_to_go_on

        echo_ready_to_go_on(cli.store)


@plan.command()
@click.argument("plan_ref", metavar="PLAN")
@format_option
@pass_cli
def show(cli: CliContext, plan_ref: str, local_format: str | None) -> None:
    """Show one plan: phase, state, attempt, profile, counts, child plans, corrections."""
    from cleveragents_tui.engine.read import browse
    from cleveragents_tui.export import json as export_json

    details = browse.show_plan(cli.store, plan_ref)
    echo_either(
        cli,
        local_format,
        lambda: export_json.plan_document(details),
        lambda: render.plan_details(details),
    )
    if cli.wants_json(local_format):
        return
    from cleveragents_tui.cli.outcome import next_steps, paused_ways_on

    if details.summary.plan.state is PlanState.PAUSED:
        paused_ways_on(cli.store, details.summary.plan)
    elif not details.goes_on_with_a_run and (lines := next_steps(cli.store, details.summary.plan)):
        # what it waits for and how to answer, or where it landed, as at the end of the run
        # that left it so (a plan that goes on with a run says so on its approvals line)
        echo("applied" if details.summary.plan.state is PlanState.APPLIED else "next")
        for line in lines:
            echo(f"  {line}")


@plan.command()
@click.argument("plan_ref", metavar="PLAN")
@click.option(
    "--show-superseded", is_flag=True, help="Include decisions replaced by corrections (marked ✗)."
)
@click.option(
    "--format",
    "local_format",
    type=click.Choice(["text", "json", "png"]),
    default=None,
    help="Output as text (default), a stable JSON document (see docs/json-formats.md), "
    "or a PNG image (needs -o).",
)
@output_file_options("Write to FILE instead of standard output (required for png).")
@pass_cli
def tree(
    cli: CliContext,
    plan_ref: str,
    show_superseded: bool,
    local_format: str | None,
    output: Path | None,
    force: bool,
) -> None:
    """Print the decision tree of PLAN, or write it to a file with -o.

    Each line: decision id, tree branch, type, chosen option, confidence, ⚑ when the decision
    has a checkpoint group. ↻ marks a correction, ✗ a superseded decision.

    --format=png -o FILE draws the tree as an image: boxes coloured by phase, corrections
    outlined in red, superseded decisions faded, checkpoints marked with a diamond.
    """
    from cleveragents_tui.engine.read import browse
    from cleveragents_tui.export import json as export_json
    from cleveragents_tui.export import png as export_png
    from cleveragents_tui.export import tree_file

    fmt = local_format or cli.output_format or "text"
    if fmt == "png" and output is None:
        raise UserError("--format=png needs an output file", "add -o FILE.png")
    if output is not None:
        tree_file.check_output(output, force=force)
    result = browse.plan_tree(cli.store, plan_ref, show_superseded=show_superseded)
    if fmt == "png":
        assert output is not None
        width, height = export_png.render_tree_png(result, output)
        echo(f"wrote {output} ({width}×{height} px, {len(result.lines)} decisions)")
        return
    if fmt == "json":
        text = json_text(export_json.plan_tree_document(result))
    else:
        text = printable(render.plan_tree(result))  # a file, too, is shown in a terminal
    if output is None:
        echo(text)
    else:
        tree_file.write_text(output, text + "\n", force=force)
        echo(f"wrote {output}")


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
    downstream impact, context, checkpoint group and tool invocations (what the app's
    details panel shows)."""
    from cleveragents_tui.engine.read import browse, tui_queries
    from cleveragents_tui.export import json as export_json
    from cleveragents_tui.views.explain import explanation_view
    from cleveragents_tui.views.sections import to_plain_text

    explanation = browse.explain_decision(cli.store, decision_ref, plan_ref)
    if cli.wants_json(local_format):
        echo_json(export_json.decision_document(explanation))
    else:
        decision = explanation.decision
        group = tui_queries.checkpoint_group(cli.store, decision.plan_id, decision.decision_id)
        echo(to_plain_text(explanation_view(explanation, group)))
