"""A chat model looks at a database before it decides: in Strategize (which only reads) it
queries the sandbox with `local/query-sql`, is sent the rows in its next turn, and in Execute
changes them with `local/run-sql`. Applied, the database holds what the same UPDATE run on a
copy of it holds (the oracle). The model is the OpenAI-compatible server of tests/support,
through the real LangChain client."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.engine.run.runner import start_plan
from cleveragents_tui.store.store import Store
from tests.support.chat_plans import chat_options
from tests.support.folders import add_database
from tests.support.openai_server import OpenAIServer, finish_phase, record_decision
from tests.support.openai_server import openai_server as openai_server  # the fixture

pytest.importorskip("langchain_openai")

SHOP = "local/shop"
RAISE = "UPDATE prices SET cents = cents + 10 WHERE item = :item"


def _rows(path: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(path) as connection:
        found = connection.execute("SELECT item, cents FROM prices ORDER BY item").fetchall()
    connection.close()
    return [(str(item), int(cents)) for item, cents in found]


def test_the_strategy_queries_the_database_and_execute_changes_what_it_saw(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    database = tmp_path / "shop.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE prices (item TEXT PRIMARY KEY, cents INTEGER)")
        connection.executemany("INSERT INTO prices VALUES (?, ?)", [("tea", 250), ("cake", 400)])
    connection.close()
    oracle = tmp_path / "oracle.db"
    shutil.copy(database, oracle)
    with sqlite3.connect(oracle) as connection:
        connection.execute(RAISE.replace(":item", "'tea'"))
    connection.close()

    query = {
        "tool": "local/query-sql",
        "arguments": {"resource": SHOP, "sql": "SELECT item, cents FROM prices ORDER BY item"},
    }
    change = {
        "tool": "local/run-sql",
        "arguments": {"resource": SHOP, "sql": RAISE, "params": {"item": "tea"}},
    }
    openai_server.add(
        record_decision(
            key="look",
            decision_type="strategy_choice",
            question="Which price goes up?",
            chosen_option="read the prices, then raise tea's",
            confidence=0.9,
            tool_calls=[query],
        ),
        finish_phase(),
        record_decision(
            key="raise",
            decision_type="implementation_choice",
            question="The change?",
            chosen_option="tea + 10 cents",
            parent_key="look",
            depends_on=["look"],
            confidence=0.9,
            tool_calls=[change],
        ),
        finish_phase(),
    )
    store = Store.open(str(tmp_path / "plan.db"))
    try:
        add_database(store, SHOP, str(database))
        action = Action(
            name="local/prices",
            prompt="Raise the price of tea by 10 cents",
            resources=(SHOP,),
            tools=("local/query-sql", "local/run-sql"),
        )
        options = chat_options(tmp_path, "prices", openai_server)
        plan = start_plan(store, action, profile_override="ci", options=options)

        assert plan.state is PlanState.APPLIED, show_plan(store, plan.plan_id)
        first = openai_server.completions[0]
        offered = first.text.split("## Tools your decisions may call")[1].split("##")[0]
        assert "local/query-sql" in offered and "local/run-sql" not in offered  # reads only
        after = openai_server.completions[1].text  # the strategy's next turn
        assert "result of look call 1: local/query-sql" in after
        assert '["item", "cents"]\n["cake", 400]\n["tea", 250]\n[2 row(s)]' in after
        assert _rows(database) == _rows(oracle) == [("cake", 400), ("tea", 260)]
        with store.unit_of_work() as uow:
            [look] = [d for d in uow.decisions.for_plan(plan.plan_id) if d.step_key == "look"]
        # what a person browsing the plan reads: the query, and the rows the model was sent
        explained = CliRunner().invoke(
            cli, ["--db", str(tmp_path / "plan.db"), "plan", "explain", look.decision_id]
        )
        assert explained.exit_code == 0, explained.output
        assert (
            "  local/query-sql  (reads:database)\n"
            f"    resource: {SHOP}; sql: SELECT item, cents FROM prices ORDER BY item\n"
            '    ✓ ["item", "cents"]\n'
            '      ["cake", 400]\n'
            '      ["tea", 250]\n'
            "      [2 row(s)]\n"
        ) in explained.output
    finally:
        store.close()
