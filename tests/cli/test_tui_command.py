"""``agents tui PLAN`` in a real terminal: the app opens on that plan's decision tree."""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from cleveragents_tui.cli import cli
from tests.support.terminal import WAIT_SECONDS, Terminal


def _quits(app: Terminal) -> int:
    """``q`` typed until the app ends (under load a key typed while the screen is still being
    set up was seen to go unread); its exit code."""
    for _ in range(5):
        app.type(b"q")
        code = app.ended(WAIT_SECONDS / 10)
        if code is not None:
            return code
    raise AssertionError("q never quit the app")


def test_agents_tui_plan_opens_on_that_plans_tree(tmp_path: Path) -> None:
    db = str(tmp_path / "agents.db")
    assert CliRunner().invoke(cli, ["--db", db, "demo-data"]).exit_code == 0
    listed = CliRunner().invoke(cli, ["--db", db, "--format=json", "plan", "list"])
    plan = next(p for p in json.loads(listed.stdout)["plans"] if p["parent_plan_id"] is None)
    env = {**os.environ, "TERM": "xterm-256color", "HOME": str(tmp_path)}
    app = Terminal(["--db", db, "tui", plan["plan_id"][:20]], env, rows=30, columns=120)
    try:
        # the tree's root decision (only the plan's screen shows decision types), and the
        # details of the decision under the cursor: the plan's screen is up
        app.wait_for("prompt_definition", "question")
        assert _quits(app) == 0
    finally:
        app.close()


def test_two_different_plans_are_refused_in_one_line(tmp_path: Path) -> None:
    db = str(tmp_path / "agents.db")
    result = CliRunner().invoke(cli, ["--db", db, "tui", "01AAAA", "--plan", "01BBBB"])
    assert result.exit_code == 2
    assert result.stderr == (
        "error: two plans given (01AAAA, --plan 01BBBB): give one, as PLAN or as --plan\n"
    )
    assert not Path(db).exists()  # refused before the store was opened
