from __future__ import annotations

import pytest
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


@pytest.mark.parametrize(
    ("options", "settings"),
    [
        ("", {"jit": "off"}),
        ("&options=-c%20statement_timeout%3D4321", {"statement_timeout": "4321ms", "jit": "off"}),
        ("&options=-c%20jit%3Don", {"jit": "on"}),
    ],
    ids=["jit-off-by-default", "url-options-kept", "url-turns-jit-back-on"],
)
def test_postgres_connections_run_without_jit_unless_the_url_says(
    postgres_url: str, options: str, settings: dict[str, str]
) -> None:
    """JIT compiled the preview's affected-subtree CTE anew at each run (~30 ms for a 9 ms
    query) once the planner's estimate on tables not yet analysed passed its threshold; the
    URL's own options still apply, and come after (the last ``-c`` of a setting wins)."""
    store = Store.open(postgres_url + options)
    try:
        with store.engine.connect() as connection:
            for name, value in settings.items():
                assert connection.execute(text(f"SHOW {name}")).scalar_one() == value
    finally:
        store.close()
