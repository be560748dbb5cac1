"""An older database keeps its data through `agents db upgrade`."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest
from alembic import command
from alembic.config import Config
from click.testing import CliRunner
from sqlalchemy import Table, inspect

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.errors import DatabaseUnavailableError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store.database import make_engine, normalise_url
from cleveragents_tui.store.schema import SCHEMA_HEAD, current_revision
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.tables import PlanRow


def test_a_0001_database_is_refused_until_upgraded_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    engine = make_engine(normalise_url(str(path)))
    config = Config()
    config.set_main_option("script_location", "cleveragents_tui.store:migrations")
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
    plan = Plan(action="local/old")
    with engine.begin() as connection:
        # declared a FROM clause of any kind: a mapped class's is its Table
        plans = cast(Table, PlanRow.__table__)
        connection.execute(plans.insert().values(**plan.model_dump()))
    engine.dispose()

    with pytest.raises(DatabaseUnavailableError, match="run `agents db upgrade`"):
        Store.open(str(path))
    result = CliRunner().invoke(cli, ["--db", str(path), "db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert f"schema upgraded from 0001 to revision {SCHEMA_HEAD}" in result.output

    store = Store.open(str(path))
    try:
        assert current_revision(store.engine) == SCHEMA_HEAD
        columns = {c["name"] for c in inspect(store.engine).get_columns("checkpoint_metadata")}
        assert "pruned_at" in columns
        with store.unit_of_work() as uow:
            assert uow.plans.get(plan.plan_id) == plan
    finally:
        store.close()
