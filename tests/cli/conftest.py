from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cleveragents_tui.cli import cli

Run = Callable[..., Result]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    """Invoke ``agents --db <tmp file> ARGS`` in-process."""
    db = str(tmp_path / "agents.db")

    def invoke(*args: str, db_url: str | None = db) -> Result:
        prefix = ["--db", db_url] if db_url else []
        return CliRunner().invoke(cli, [*prefix, *args], catch_exceptions=False)

    return invoke


@pytest.fixture
def sample(run: Run) -> dict[str, str]:
    """Load the sample plan; returns ids of its parts by role."""
    assert run("demo-data").exit_code == 0
    plans = json.loads(run("plan", "list", "--format=json").output)["plans"]
    top = next(p for p in plans if p["parent_plan_id"] is None)
    child = next(p for p in plans if p["parent_plan_id"] == top["plan_id"])
    tree = json.loads(
        run("plan", "tree", top["plan_id"], "--show-superseded", "--format=json").output
    )
    by_choice = {d["chosen_option"]: d["decision_id"] for d in tree["decisions"]}
    return {
        "plan": top["plan_id"],
        "child": child["plan_id"],
        "impl": by_choice["click, as the other commands do"],
        "superseded": by_choice["A synchronous handler that prints directly"],
        "notify": by_choice["local/send-notification"],
    }
