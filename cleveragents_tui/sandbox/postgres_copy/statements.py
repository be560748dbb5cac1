"""Which SQL a tool may run in a PostgreSQL copy, and which Apply runs again on the target.

A statement that reaches outside the sandbox's database (the whole server, another
session) is refused; a schema statement is logged, so that Apply can run it again.
"""

from __future__ import annotations

import re

from cleveragents_tui.sandbox.sql_confinement import postgres_refusal

# Objects of the whole server, outside the sandbox's database: a statement naming them would
# reach the real database (or every database), so it is refused. When unsure, refused.
_SERVER_OBJECTS = re.compile(
    r"\b(?:create|alter|drop|comment\s+on|security\s+label\s+on)\s+(?:database|tablespace)\b"
    r"|\b(?:grant|revoke)\b[^;]*?\bon\s+(?:database|tablespace)\b"
    r"|\bpg_(?:terminate|cancel)_backend\b|\breassign\s+owned\b",
    re.IGNORECASE | re.DOTALL,
)
# A statement that changes the schema: logged, so that Apply can run it on the target.
SCHEMA_STATEMENT = re.compile(
    r"^\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*"
    r"(CREATE|ALTER|DROP|COMMENT|GRANT|REVOKE|SECURITY\s+LABEL)\b",
    re.IGNORECASE | re.DOTALL,
)


def refusal(sql_text: str) -> str | None:
    """Why ``sql_text`` may not run in the copy (nor, at Apply, on the target), or None."""
    why = postgres_refusal(sql_text)
    if why is None and _SERVER_OBJECTS.search(sql_text):
        why = "it names a database, a tablespace or another session, outside the sandbox"
    return why
