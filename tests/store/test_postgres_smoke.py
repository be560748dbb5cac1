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
