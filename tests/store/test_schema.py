"""Alembic owns the schema: the migrated database matches the ORM, and opening checks it."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text

from cleveragents_tui.domain.errors import DatabaseUnavailableError
from cleveragents_tui.store.database import make_engine, normalise_url
from cleveragents_tui.store.schema import SCHEMA_HEAD, current_revision
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.tables import Base


def test_schema_head_constant_matches_the_migration_chain() -> None:
    config = Config()
    config.set_main_option("script_location", "cleveragents_tui.store:migrations")
    assert ScriptDirectory.from_config(config).get_current_head() == SCHEMA_HEAD


# SQLite's expression indexes (migration 0010) are not reflected, so not compared there
@pytest.mark.filterwarnings("ignore:Skipped unsupported reflection of expression-based index")
@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based")
def test_migrated_database_matches_the_orm_exactly(store: Store) -> None:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def test_an_empty_sqlite_file_is_migrated_with_wal_and_foreign_keys(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "new.db"))
    try:
        assert current_revision(store.engine) == SCHEMA_HEAD
        with store.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 10_000
    finally:
        store.close()


def test_a_database_with_foreign_tables_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE customers (id INTEGER PRIMARY KEY)"))
    engine.dispose()
    with pytest.raises(DatabaseUnavailableError, match="no cleveragents schema"):
        Store.open(str(path))


def test_a_newer_schema_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    Store.open(str(path)).close()
    engine = make_engine(normalise_url(str(path)))
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    with pytest.raises(DatabaseUnavailableError, match="newer than this version knows"):
        Store.open(str(path))


def test_unsupported_and_unreachable_urls_give_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DatabaseUnavailableError, match="not supported"):
        Store.open("mysql://root@localhost/x")
    with pytest.raises(DatabaseUnavailableError, match="does not exist"):
        Store.open(str(tmp_path / "missing-folder" / "a.db"))
    with pytest.raises(DatabaseUnavailableError, match="cannot open"):
        Store.open(f"postgresql://nobody@/x?host={tmp_path}&port=1")
