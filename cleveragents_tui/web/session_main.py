"""The process behind one browser tab: the full app on the server's database, as its user.

Started by the server (``python -P -m cleveragents_tui.web.session_main``) with the user's
name and the database URL in the environment. Its stdout is textual-serve's protocol
channel: nothing else may print there, so errors go to stderr.
"""

from __future__ import annotations

import os
import sys

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.config import app_theme
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.web.sessions import DATABASE_ENV, USER_ENV


def main() -> int:
    user, database = os.environ.get(USER_ENV), os.environ.get(DATABASE_ENV)
    if not user or not database:
        print(f"error: {USER_ENV} and {DATABASE_ENV} must be set by agents serve", file=sys.stderr)
        return 2
    try:
        store = Store.open(database)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        AgentsApp(store, user=user, theme=app_theme(store)).run()
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
