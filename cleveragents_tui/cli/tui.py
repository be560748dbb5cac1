"""``agents tui``: open the Textual app (imported lazily: other commands never load Textual)."""

from __future__ import annotations

import click

from cleveragents_tui.cli.context import CliContext, pass_cli
from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.errors import UserError


def launch(
    cli: CliContext, plan_ref: str | None, who: str | None, theme: str | None = None
) -> None:
    """Open the app on the store (and on ``plan_ref``'s plan). Textual is imported here, on
    demand, so the other commands never load it."""
    from cleveragents_tui.engine.setup.config import app_theme, theme_value

    theme = theme_value(theme) if theme is not None else app_theme(cli.store)
    plan_id = None
    if plan_ref is not None:
        from cleveragents_tui.engine import show_plan

        plan_id = show_plan(cli.store, plan_ref).summary.plan.plan_id
    from cleveragents_tui.tui.app import run_app

    run_app(cli.store, plan_id=plan_id, user=who, theme=theme)


@click.command("tui")
@click.argument("plan_arg", metavar="[PLAN]", required=False)
@click.option("--plan", "plan_ref", metavar="PLAN", help="The same as PLAN.")
@click.option(
    "--as",
    "who",
    metavar="NAME",
    help="Who answers approvals and corrects (default: your user name).",
)
@click.option(
    "--theme",
    type=click.Choice(["dark", "light"]),
    help="For this run (default: the tui.theme setting, which `t` in the app changes).",
)
@pass_cli
def tui(
    cli: CliContext,
    plan_arg: str | None,
    plan_ref: str | None,
    who: str | None,
    theme: str | None,
) -> None:
    """Open the app: plans, decision trees, corrections with impact preview, diffs, approvals.

    With PLAN (an id or a unique prefix of 4 or more characters) it opens on that plan's
    decision tree. Keys: ? help, ctrl+p every action by name, q quit. Use the global --db to
    choose the database.
    """
    if plan_arg is not None and plan_ref is not None and plan_arg != plan_ref:
        given = ", --plan ".join(printable(r, one_line=True) for r in (plan_arg, plan_ref))
        raise UserError(f"two plans given ({given})", "give one, as PLAN or as --plan")
    launch(cli, plan_arg or plan_ref, who, theme)
