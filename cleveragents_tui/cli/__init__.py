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
from cleveragents_tui.domain.display import printable, shorten
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


# Each top-level command: the cli modules defining it (the first holds ATTRIBUTE; `plan`'s
# subcommands come from four) and its help's first paragraph. A module is imported only when
# its command is looked up, so `agents --help` lists the commands without importing any of
# them (tests/test_import_hygiene.py checks the summaries against the real help).
LAZY_COMMANDS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "action": (("actions",), "action", "Check and register action files (docs/actions.md)."),
    "approval": (
        ("approvals",),
        "approval",
        "List and answer pending approvals (escalations, phase gates, budget pauses, ...).",
    ),
    "automation-profile": (
        ("profile",),
        "automation_profile",
        "Automation profiles: which tasks run automatically and which wait for a person.",
    ),
    "config": (("config",), "config", "Read and change settings."),
    "db": (("db",), "db", "Manage the database schema (Alembic migrations)."),
    "demo": (
        ("demo",),
        "demo",
        "Build a demo project (git repository, SQLite app database, docs, team chat outbox), "
        "run the demo plan on it to the Apply gate, and open the app on it (unless --no-tui, "
        "--format=json, or stdout is not a terminal: then say what to do next).",
    ),
    "demo-data": (
        ("demo",),
        "demo_data_command",
        "Load a realistic sample plan (with a correction and a child plan) and print its tree.",
    ),
    "doctor": (
        ("doctor",),
        "doctor",
        "Check every invariant of the database, the sandboxes and the actor state; exit 1 if "
        "anything is broken.",
    ),
    "gc": (
        ("cleanup",),
        "gc",
        "Drop checkpoints of superseded attempts older than the retention period.",
    ),
    "init": (
        ("init",),
        "init",
        "Register the git repository this folder is in (sandboxed as git worktrees: your "
        "index and working tree are never touched) and write a starter action file with "
        "comments.",
    ),
    "plan": (
        ("plan",),  # its group loads correct, lifecycle and cleanup when needed
        "plan",
        "Start, run, correct and land plans; browse their decision trees.",
    ),
    "resource": (
        ("resources",),
        "resource",
        "Register the repositories, folders and databases plans may change.",
    ),
    "serve": (
        ("serve",),
        "serve",
        "Serve the app to browsers: every tab gets the full app on this database (--db).",
    ),
    "tui": (
        ("tui",),
        "tui",
        "Open the app: plans, decision trees, corrections with impact preview, diffs, approvals.",
    ),
}


class AgentsGroup(click.Group):
    """Turns :class:`UserError` — and an environment failure (a full disk, a read-only file
    system) — into one line on stderr and exit code 2. Loads each command on first use
    (:data:`LAZY_COMMANDS`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY_COMMANDS:
            self.commands[cmd_name] = load_command(cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list from the stored summaries: no command module imported."""
        names = self.list_commands(ctx)
        shown = {
            name: self.commands[name]
            if name in self.commands
            else click.Command(name, help=LAZY_COMMANDS[name][2])
            for name in names
        }
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, command.get_short_help_str(limit)) for name, command in shown.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:
            _show_help(ctx)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError as exc:  # `agents plan`: a group, bare
            _show_help(exc.ctx or ctx)
        except UserError as exc:
            _refuse(exc)
            ctx.exit(getattr(exc, "exit_code", USER_ERROR_EXIT))  # cli/outcome.py: 1 or 3
        except OSError as exc:
            error = environment_error(exc)
            if error is None:
                raise
            _refuse(error)
            ctx.exit(USER_ERROR_EXIT)


def _refuse(error: UserError) -> None:
    """An error is one line, even when it names a path or text holding a newline."""
    echo(printable(f"error: {error}", one_line=True), err=True)


def _show_help(ctx: click.Context) -> None:
    """Help on stdout and exit 0 for a bare ``agents`` or ``agents plan``: help asked for by
    leaving the command out, not a usage error (click ≥ 8.2 exits 2 there, 8.1 exited 0)."""
    echo(ctx.get_help())
    ctx.exit(0)


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
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Print each decision and step on stderr while a plan runs or a correction replays "
    "(plan use/run/resume/apply, plan correct, edit-strategy, demo; each also takes it "
    "after its name). "
    "Default: when stderr is a terminal.",
)
@click.version_option(__version__, prog_name="agents")
@click.pass_context
def cli(
    ctx: click.Context, db_url: str | None, output_format: str | None, progress: bool | None
) -> None:
    """Record every decision an agent plan makes, browse the decision trees, correct them.

    \b
    Start here:
      agents demo                    build a demo project, run a plan to its Apply gate
      agents init                    use it on your repository (--folder: a plain folder)
      agents demo-data               load a sample plan and show its tree
      agents plan list               every plan, child plans under their parent
      agents plan tree PLAN          the decision tree (--show-superseded, --format=json)
      agents plan explain DECISION   question, choice, alternatives, rationale, impact
      agents doctor                  check the store and sandboxes for broken invariants

    Ids may be shortened to any unique prefix of 4 or more characters.
    """
    context = CliContext(db_url, output_format, progress)
    ctx.obj = context
    ctx.call_on_close(context.close)


def load_command(name: str) -> click.Command:
    """Import the modules of top-level command ``name`` and return it, refusing the global
    ``--format=json`` where it has no JSON (cli/json_output.py)."""
    from importlib import import_module

    from cleveragents_tui.cli.json_output import refuse_elsewhere

    modules, attribute, _ = LAZY_COMMANDS[name]
    loaded = [import_module(f"cleveragents_tui.cli.{module}") for module in modules]
    command: click.Command = getattr(loaded[0], attribute)
    if not getattr(command, "refuses_json_itself", False):  # `plan` refuses as it loads
        refuse_elsewhere(command, (name,))
    return command


def main() -> None:
    try:
        cli.main(prog_name="agents")
    except BrokenPipeError:  # `agents plan tree X | head`: stop quietly
        sys.stderr.close()
        sys.exit(0)
