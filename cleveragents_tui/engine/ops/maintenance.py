"""Database maintenance services."""

from __future__ import annotations

from cleveragents_tui.store import schema
from cleveragents_tui.store.store import Store


def upgrade_database(url: str | None) -> tuple[str, str | None, str]:
    """Migrate the database to the newest schema: (url shown to people, before, after)."""
    store = Store.open(url, migrate=False)
    try:
        before, after = schema.upgrade(store.engine)
        return store.engine.url.render_as_string(), before, after
    finally:
        store.close()
