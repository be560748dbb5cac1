"""A chat model looks at a database before it decides: in Strategize (which only reads) it
queries the sandbox with `local/query-sql`, is sent the rows in its next turn, and in Execute
changes them with `local/run-sql`. Applied, the database holds what the same UPDATE run on a
copy of it holds (the oracle). The model is the OpenAI-compatible server of tests/support,
through the real LangChain client."""

from __future__ import annotations

import secrets
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.core.sandboxes import sandbox_root
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.engine.run.runner import start_plan
from cleveragents_tui.sandbox.database import is_savepoint_sandbox
from cleveragents_tui.store.store import Store
from tests.support.chat_plans import chat_options
from tests.support.folders import add_database
from tests.support.openai_server import OpenAIServer, finish_phase, record_decision
from tests.support.openai_server import openai_server as openai_server  # the fixture
from tests.support.postgres import PostgresServer

pytest.importorskip("langchain_openai")

SHOP = "local/shop"
RAISE = "UPDATE prices SET cents = cents + 10 WHERE item = :item"


def _rows(path: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(path) as connection:
        found = connection.execute("SELECT item, cents FROM prices ORDER BY item").fetchall()
    connection.close()
    return [(str(item), int(cents)) for item, cents in found]


def _run_plan(store: Store, tmp_path: Path, openai_server: OpenAIServer) -> Plan:
    """The model reads the prices in Strategize, raises tea's in Execute; the plan applies."""
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
    action = Action(
        name="local/prices",
        prompt="Raise the price of tea by 10 cents",
        resources=(SHOP,),
        tools=("local/query-sql", "local/run-sql"),
    )
    options = chat_options(tmp_path, "prices", openai_server)
    return start_plan(store, action, profile_override="ci", options=options)


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

    store = Store.open(str(tmp_path / "plan.db"))
    try:
        add_database(store, SHOP, str(database))
        plan = _run_plan(store, tmp_path, openai_server)

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


@pytest.mark.postgres
def test_a_login_that_cannot_copy_the_database_lets_the_model_read_it_too(
    tmp_path: Path,
    openai_server: OpenAIServer,
    postgres_server: PostgresServer,
    postgres_url: str,
) -> None:
    """A team's login without CREATEDB: the sandbox is one open transaction, not a copy. The
    model still reads the rows in Strategize (it was refused: no read-only connection), and
    the applied database matches the same UPDATE run on another database (the oracle)."""
    role = f"shop_{secrets.token_hex(4)}"
    oracle_url = postgres_server.create_database(f"o_{secrets.token_hex(6)}")
    for url in (postgres_url, oracle_url):
        _postgres(url, "CREATE TABLE prices (item text PRIMARY KEY, cents integer)")
        _postgres(url, "INSERT INTO prices VALUES ('tea', 250), ('cake', 400)")
    _postgres(oracle_url, RAISE.replace(":item", "'tea'"))
    _postgres(postgres_url, f"CREATE ROLE {role} LOGIN NOCREATEDB")
    _postgres(postgres_url, f"GRANT SELECT, UPDATE ON prices TO {role}")
    store = Store.open(str(tmp_path / "plan.db"))
    try:
        add_database(store, SHOP, make_url(postgres_url).set(username=role).render_as_string())
        plan = _run_plan(store, tmp_path, openai_server)

        assert plan.state is PlanState.APPLIED, show_plan(store, plan.plan_id)
        assert is_savepoint_sandbox(sandbox_root(tmp_path / "prices-sandboxes", plan.plan_id, SHOP))
        after = openai_server.completions[1].text  # the strategy's next turn
        assert '["item", "cents"]\n["cake", 400]\n["tea", 250]\n[2 row(s)]' in after
        found = _postgres(postgres_url, "SELECT item, cents FROM prices ORDER BY item")
        assert found == _postgres(oracle_url, "SELECT item, cents FROM prices ORDER BY item")
        assert found == [("cake", 400), ("tea", 260)]
    finally:
        store.close()
        postgres_server.drop_database(make_url(oracle_url).database or "")
        _postgres(postgres_url, f"DROP OWNED BY {role}")
        _postgres(postgres_url, f"DROP ROLE {role}")


def _postgres(url: str, sql: str) -> list[tuple[object, ...]]:
    """One statement on ``url``, committed; its rows, if any."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            result = connection.execute(text(sql))
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        engine.dispose()
