"""The ``agents`` command line.

Errors a person can cause print one line and exit with code 2 (no traceback). Read-only
commands import neither Textual nor LangGraph, so they start fast.
"""

from __future__ import annotations

import errno
import sys
from typing import Any

import click

from cleveragents_tui import __version__
from cleveragents_tui.cli.context import CliContext, echo
from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.errors import UserError

USER_ERROR_EXIT = 2


# What the machine, not the command, got wrong: one line with the fix, like a UserError.
_ENVIRONMENT = {
    errno.ENOSPC: "free some space, then run `agents doctor`",
    errno.EDQUOT: "free some space within your disk quota, then run `agents doctor`",
    errno.EROFS: "the file system is read-only: pass --db or a sandbox folder on a writable one",
    errno.EACCES: "make it readable and writable for you, or pass another path",
    errno.EPERM: "make it readable and writable for you, or pass another path",
}


def environment_error(exc: OSError) -> UserError | None:
    """A full disk, a read-only file system or a permission refused, as the one-line
    :class:`UserError` a person can act on; None for any other ``OSError`` (a bug)."""
    fix = _ENVIRONMENT.get(exc.errno or 0)
    if fix is None:
        return None
    where = f" ({shorten(str(exc.filename), 200)})" if exc.filename else ""
    return UserError(f"{exc.strerror or exc}{where}", fix)


class AgentsGroup(click.Group):
    """Turns :class:`UserError` — and an environment failure (a full disk, a read-only file
    system) — into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UserError as exc:
            echo(f"error: {exc}", err=True)
            ctx.exit(getattr(exc, "exit_code", USER_ERROR_EXIT))  # cli/outcome.py: 1 or 3
        except OSError as exc:
            error = environment_error(exc)
            if error is None:
                raise
            echo(f"error: {error}", err=True)
            ctx.exit(USER_ERROR_EXIT)


@click.group(
    cls=AgentsGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--db",
    "db_url",
    envvar="AGENTS_DATABASE_URL",
    metavar="URL",
    help="Database: a SQLite file path or sqlite:///PATH, or postgresql://USER@HOST/DB. "
    "Default: agents.db in your user data folder. Env: AGENTS_DATABASE_URL.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default=None,
    help="Default output format of every data command (each also takes --format).",
)
@click.version_option(__version__, prog_name="agents")
@click.pass_context
def cli(ctx: click.Context, db_url: str | None, output_format: str | None) -> None:
    """Record every decision an agent plan makes, browse the decision trees, correct them.

    \b
    Start here:
      agents demo-data               load a sample plan and show its tree
      agents plan list               every plan, child plans under their parent
      agents plan tree PLAN          the decision tree (--show-superseded, --format=json)
      agents plan explain DECISION   question, choice, alternatives, rationale, impact
      agents doctor                  check the store and sandboxes for broken invariants

    Ids may be shortened to any unique prefix of 4 or more characters.
    """
    context = CliContext(db_url, output_format)
    ctx.obj = context
    ctx.call_on_close(context.close)


def _register() -> None:
    from cleveragents_tui.cli.actions import action
    from cleveragents_tui.cli.approvals import approval
    from cleveragents_tui.cli.cleanup import gc
    from cleveragents_tui.cli.config import config
    from cleveragents_tui.cli.correct import correct  # noqa: F401 - registers plan correct/diff
    from cleveragents_tui.cli.db import db
    from cleveragents_tui.cli.demo import demo_data_command
    from cleveragents_tui.cli.doctor import doctor
    from cleveragents_tui.cli.init import init
    from cleveragents_tui.cli.json_output import refuse_elsewhere
    from cleveragents_tui.cli.lifecycle import demo
    from cleveragents_tui.cli.plan import plan
    from cleveragents_tui.cli.profile import automation_profile
    from cleveragents_tui.cli.resources import resource
    from cleveragents_tui.cli.serve import serve
    from cleveragents_tui.cli.tui import tui

    cli.add_command(plan)
    cli.add_command(db)
    cli.add_command(demo_data_command)
    cli.add_command(doctor)
    cli.add_command(demo)
    cli.add_command(automation_profile)
    cli.add_command(config)
    cli.add_command(approval)
    cli.add_command(tui)
    cli.add_command(serve)
    cli.add_command(init)
    cli.add_command(resource)
    cli.add_command(action)
    cli.add_command(gc)
    refuse_elsewhere(cli)  # last: every command is registered


_register()


def main() -> None:
    try:
        cli.main(prog_name="agents")
    except BrokenPipeError:  # `agents plan tree X | head`: stop quietly
        sys.stderr.close()
        sys.exit(0)
