"""`agents plan tree` loads what it needs (issue 22): not the correction, run or cleanup
commands, nor the engines behind them — and every `plan` subcommand is still there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cleveragents_tui.cli import cli

PROBE = """
import sys
from cleveragents_tui.cli import cli
try:
    cli.main(["--db", sys.argv[1], "plan", "tree", "0000"], prog_name="agents")
except SystemExit:
    pass
print("LOADED:" + ",".join(sorted(m for m in sys.modules if m in (
    "cleveragents_tui.cli.correct", "cleveragents_tui.cli.lifecycle",
    "cleveragents_tui.cli.cleanup", "cleveragents_tui.engine.correct.execute",
    "cleveragents_tui.engine.run.runner"))))
"""


def test_plan_tree_imports_no_correction_or_run_command(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    upgraded = CliRunner().invoke(cli, ["--db", db, "db", "upgrade"])
    assert upgraded.exit_code == 0, upgraded.output

    result = subprocess.run(
        [sys.executable, "-c", PROBE, db], capture_output=True, text=True, timeout=120
    )

    assert "no plan starts with 0000" in result.stderr
    assert result.stdout.strip().splitlines()[-1] == "LOADED:"


def test_plan_lists_and_runs_the_subcommands_of_every_module(tmp_path: Path) -> None:
    db = str(tmp_path / "a.db")
    listed = CliRunner().invoke(cli, ["--db", db, "plan", "--help"])
    assert listed.exit_code == 0, listed.output
    for name in ("tree", "correct", "diff", "edit-strategy", "run", "set-profile", "discard"):
        assert f"  {name} " in listed.output, name
    # a subcommand of a lazily loaded module still refuses the global --format=json
    refused = CliRunner().invoke(
        cli, ["--db", db, "--format", "json", "plan", "set-profile", "0000", "auto"]
    )
    assert refused.exit_code == 2
    assert "agents plan set-profile has no JSON output" in refused.output
