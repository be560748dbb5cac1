from __future__ import annotations

from sqlalchemy import text

from cleveragents_tui.store.schema import SCHEMA_HEAD, current_revision
from cleveragents_tui.store.store import Store


def test_store_opens_and_migrates_both_backends(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        assert current_revision(store.engine) == SCHEMA_HEAD
        with store.engine.connect() as connection:
            assert connection.execute(text("SELECT count(*) FROM plans")).scalar_one() == 0
    finally:
        store.close()


def test_postgres_connections_run_without_jit(postgres_url: str) -> None:
    """JIT compiled the preview's affected-subtree CTE anew at each run (~30 ms for a 9 ms
    query) once the planner's estimate on tables not yet analysed passed its threshold."""
    store = Store.open(postgres_url)
    try:
        with store.engine.connect() as connection:
            assert connection.execute(text("SHOW jit")).scalar_one() == "off"
    finally:
        store.close()


def test_postgres_options_of_the_url_are_kept(postgres_url: str) -> None:
    store = Store.open(f"{postgres_url}&options=-c%20statement_timeout%3D4321")
    try:
        with store.engine.connect() as connection:
            assert connection.execute(text("SHOW statement_timeout")).scalar_one() == "4321ms"
            assert connection.execute(text("SHOW jit")).scalar_one() == "off"
    finally:
        store.close()


def test_postgres_url_can_turn_jit_back_on(postgres_url: str) -> None:
    store = Store.open(f"{postgres_url}&options=-c%20jit%3Don")
    try:
        with store.engine.connect() as connection:
            assert connection.execute(text("SHOW jit")).scalar_one() == "on"
    finally:
        store.close()
