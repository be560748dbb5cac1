"""Start-up stays fast: the read-only CLI path imports neither Textual nor LangGraph, and the
app (each browser tab of `agents serve` starts one) imports LangGraph only to run a plan."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import sys
from cleveragents_tui.cli import cli
from cleveragents_tui.engine.read import browse
for args in (["demo-data"], ["plan", "list"], ["plan", "tree", "{plan}"]):
    try:
        cli.main(["--db", sys.argv[1], *args], standalone_mode=False)
    except SystemExit:
        pass
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "langgraph", "langchain_core", "alembic"))
print("HEAVY:" + ",".join(heavy))
"""


def test_read_only_cli_imports_neither_textual_nor_langgraph(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    # Create the schema first so the read path does not need Alembic either.
    subprocess.run(
        [sys.executable, "-m", "cleveragents_tui", "--db", db, "db", "upgrade"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    result = subprocess.run(
        [sys.executable, "-c", PROBE.replace("{plan}", "0000"), db],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    heavy = result.stdout.strip().splitlines()[-1]
    assert heavy == "HEAVY:", heavy


def test_the_app_imports_langgraph_only_to_run_a_plan() -> None:
    probe = (
        "import sys, cleveragents_tui.tui.app; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('langgraph', 'langchain_core')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


CLI_PROBE = """
import sys
from cleveragents_tui.cli import cli
try:
    cli.main(sys.argv[1:], prog_name="agents")
except SystemExit:
    pass
heavy = sorted(
    m for m in sys.modules
    if m.split(".")[0] in ("sqlalchemy", "pydantic", "yaml")
    or m.startswith(("cleveragents_tui.engine", "cleveragents_tui.store"))
)
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


@pytest.mark.parametrize(
    "args",
    [["--help"], ["--version"], ["plan", "--help"], ["serve", "--help"], ["config", "--help"]],
)
def test_help_and_version_import_neither_the_store_nor_pydantic(args: list[str]) -> None:
    """`agents --help` costs what click costs: no engine, store, SQLAlchemy or pydantic."""
    result = subprocess.run(
        [sys.executable, "-c", CLI_PROBE, *args], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout or "version" in result.stdout
    assert result.stderr.strip().splitlines()[-1] == "HEAVY:"


def test_resource_kinds_in_help_match_the_engine() -> None:
    """`resource add --help` spells the kinds out (no engine at start-up); they must agree."""
    from cleveragents_tui.cli.resources import KINDS_METAVAR
    from cleveragents_tui.engine.setup.resource_registry import KINDS

    assert "|".join(KINDS) == KINDS_METAVAR


def test_the_stored_summaries_are_the_commands_own_help() -> None:
    """`agents --help` lists stored summaries (no command imported): they match each help."""
    import click

    from cleveragents_tui.cli import LAZY_COMMANDS, cli

    context = click.Context(cli)
    for name, (_, _, summary) in LAZY_COMMANDS.items():
        command = cli.get_command(context, name)
        assert command is not None
        stub = click.Command(name, help=summary)
        for limit in (40, 76, 300):
            assert stub.get_short_help_str(limit) == command.get_short_help_str(limit), name


def test_a_browser_tab_loads_the_plan_list_without_the_engine() -> None:
    """Each tab of `agents serve` is a new process: until the person opens a plan it needs
    the store and the plan list, not the runner, the correction engine or the other screens."""
    probe = (
        "import sys, cleveragents_tui.web.session_main; "
        "print(sorted(m for m in sys.modules if m in ("
        "'cleveragents_tui.engine.run.runner', 'cleveragents_tui.engine.correct.execute', "
        "'cleveragents_tui.engine.run.lifecycle', 'cleveragents_tui.tui.screens.plan_view', "
        "'cleveragents_tui.tui.screens.diff', 'cleveragents_tui.tui.modals.correction')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
