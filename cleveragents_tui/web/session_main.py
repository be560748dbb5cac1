"""The process behind one browser tab: the full app on the server's database, as its user.

Started by the server (``python -P -m cleveragents_tui.web.session_main``), usually before
anyone opens a tab (the server keeps one started ahead, see
:class:`cleveragents_tui.web.sessions.Spare`): it loads the app's modules first, then waits
for its tab — the first line on stdin, ``{"user", "columns", "rows", "database",
"export_dir"}`` — and only then opens the database and starts the app. Its stdout is
textual-serve's protocol channel: nothing else may print there, so errors go to stderr.
"""

from __future__ import annotations

import json
import os
import sys

import textual.drivers.web_driver  # noqa: F401 - loaded ahead: App.run imports it by name

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.setup.config import app_theme
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.web.sessions import EXPORT_DIR_ENV, HEADER_LIMIT


def read_header() -> dict[str, object] | None:
    """The tab's first line, read byte by byte straight from the descriptor, so nothing
    after it (the browser's input, for the web driver) is taken from the pipe."""
    line = bytearray()
    while len(line) < HEADER_LIMIT and (byte := os.read(0, 1)) not in (b"", b"\n"):
        line += byte
    try:
        header = json.loads(line)
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


def main() -> int:
    header = read_header()
    if header is None:  # the server closed the pipe: shut down without a tab
        return 0
    user, database = header.get("user"), header.get("database")
    if not isinstance(user, str) or not user or not isinstance(database, str):
        print("error: the tab's user and database must come from agents serve", file=sys.stderr)
        return 2
    os.environ["COLUMNS"], os.environ["ROWS"] = str(header["columns"]), str(header["rows"])
    if isinstance(export_dir := header.get("export_dir"), str):  # for tui/web_exports.py
        os.environ[EXPORT_DIR_ENV] = export_dir
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
