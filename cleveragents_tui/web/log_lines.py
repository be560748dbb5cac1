"""One log line per bad request: what anyone who reaches the port sends must not fill the log.

aiohttp logs a request it could not handle — a header or URL past its 8190-byte limit, a
websocket message that is not the JSON textual-serve expects — with the whole traceback.
Those come from the client, not from a bug here: the line keeps aiohttp's message and the
exception's one-line summary (docs/web.md, "Logs"). Errors of our own code keep theirs.
"""

from __future__ import annotations

import logging

from cleveragents_tui.domain.display import shorten

CLIENT_FACING = ("aiohttp", "textual_serve")  # the loggers that handle raw client input
SUMMARY_LIMIT = 200


class OneLineErrors(logging.Filter):
    """Turn a client-facing error record's traceback into ``message: Type: summary``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.name.startswith(CLIENT_FACING):
            exc = record.exc_info[1]
            summary = shorten(" ".join(str(exc).split()), SUMMARY_LIMIT)
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: {summary}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True
