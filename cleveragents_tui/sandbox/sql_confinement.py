"""What SQL run in a database sandbox may reach: the sandbox's own database, nothing else.

An agent with only ``local/run-sql`` must not read or write any other file or program the
user (or the database server) can. Two checks, one per dialect:

* SQLite: :func:`confine_sqlite` installs an authorizer on every connection the sandbox
  opens (the tool's statements, a replay of the statement log in any process, Apply). SQLite
  asks it while compiling each statement, trigger bodies and statements SQLite runs itself
  (``VACUUM INTO`` attaches its output file) included, so no spelling gets past it. It denies
  ATTACH and DETACH (another file, the engine's own ``agents.db`` among them), every
  ``PRAGMA`` outside a short list that only reads or changes this connection's behaviour
  (``writable_schema``, ``journal_mode``, ``temp_store_directory``, ``mmap_size``... are
  out), functions that reach files or load code (``load_extension``, ``readfile``,
  ``writefile``, ``fts3_tokenizer``...), virtual tables other than full-text and R-tree
  indexes, and the ``sqlite_dbpage`` table (raw pages). Extension loading stays off.
* PostgreSQL: :func:`postgres_refusal` reads the statement text before it is sent and
  refuses, conservatively (when unsure, refused): ``COPY`` (files, programs), server-file
  and large-object functions, ``dblink``, functions that run SQL given as text, ``DO``,
  dynamic ``EXECUTE``, ``SET ROLE`` and ``SESSION AUTHORIZATION``, ``set_config``,
  ``LOAD``, extensions, foreign servers, untrusted function languages and role changes. A
  text check is only a second line: the role a resource connects as must not hold what these
  reach (docs/security.md).
"""

from __future__ import annotations

import re
import sqlite3
from typing import Final

# Pragmas that read the schema; their argument names a table or an index (or a limit).
_SCHEMA_PRAGMAS: Final = frozenset(
    {
        "table_info",
        "table_xinfo",
        "table_list",
        "index_list",
        "index_info",
        "index_xinfo",
        "foreign_key_list",
        "foreign_key_check",
        "integrity_check",
        "quick_check",
    }
)
# Pragmas allowed only to read (no argument): setting them would change the file's format.
_READ_PRAGMAS: Final = frozenset(
    {
        "collation_list",
        "function_list",
        "module_list",
        "pragma_list",
        "compile_options",
        "encoding",
        "page_count",
        "page_size",
        "freelist_count",
        "schema_version",
        "data_version",
        "max_page_count",
    }
)
# Pragmas allowed when set too: the value stays in this file or this connection.
_SET_PRAGMAS: Final = frozenset(
    {
        "user_version",
        "application_id",
        "foreign_keys",
        "defer_foreign_keys",
        "recursive_triggers",
        "case_sensitive_like",
        "busy_timeout",
        "optimize",
    }
)
# Functions that reach files or load code (most exist only in some builds or shells).
_DENIED_FUNCTIONS: Final = frozenset(
    {
        "load_extension",
        "readfile",
        "writefile",
        "edit",
        "lsmode",
        "fts3_tokenizer",
        "zipfile",
        "sqlar_compress",
        "sqlar_uncompress",
    }
)
# Virtual-table modules that keep their data inside the database file.
_MODULES: Final = frozenset({"fts3", "fts4", "fts5", "rtree", "rtree_i32", "geopoly"})
# Tables that are windows on something other than rows: raw pages, the file system.
_DENIED_TABLES: Final = frozenset({"sqlite_dbpage", "fsdir", "zipfile"})
_TABLE_ACTIONS: Final = frozenset(
    {sqlite3.SQLITE_READ, sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE}
)


def sqlite_authorizer(
    action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None
) -> int:
    """SQLite's authorizer callback: SQLITE_DENY for what reaches outside the file."""
    if action in (sqlite3.SQLITE_ATTACH, sqlite3.SQLITE_DETACH):
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        allowed = name in _SCHEMA_PRAGMAS or name in _SET_PRAGMAS
        if allowed or (name in _READ_PRAGMAS and arg2 is None):
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION:
        denied = (arg2 or "").lower() in _DENIED_FUNCTIONS
        return sqlite3.SQLITE_DENY if denied else sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_CREATE_VTABLE:
        return sqlite3.SQLITE_OK if (arg2 or "").lower() in _MODULES else sqlite3.SQLITE_DENY
    if action in _TABLE_ACTIONS and (arg1 or "").lower() in _DENIED_TABLES:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def confine_sqlite(connection: sqlite3.Connection) -> None:
    """Confine ``connection`` to its own database file (install on every connection)."""
    if hasattr(connection, "enable_load_extension"):
        connection.enable_load_extension(False)
    connection.set_authorizer(sqlite_authorizer)


def confine_sqlalchemy_connection(dbapi_connection: object, _record: object) -> None:
    """A SQLAlchemy ``connect`` listener: :func:`confine_sqlite` on the raw pysqlite one."""
    if isinstance(dbapi_connection, sqlite3.Connection):
        confine_sqlite(dbapi_connection)


SQLITE_DENIED_FIX: Final = (
    "SQL in a sandbox reaches only the resource's own database: no ATTACH, VACUUM INTO, "
    "load_extension, file functions or pragmas other than those that read the schema"
)


def sqlite_denied(message: str) -> bool:
    """Whether a SQLite error is the authorizer's refusal."""
    return "not authorized" in message or "authorization denied" in message


# -- PostgreSQL ------------------------------------------------------------------------------

# Names refused wherever they appear, quoted or not, in code or in a string.
_PG_DENIED_NAMES: Final = re.compile(
    r"\b(pg_read_file|pg_read_binary_file|pg_ls_\w+|pg_stat_file|pg_file_\w+|pg_logdir_ls"
    r"|lo_import|lo_export|dblink\w*|query_to_xml\w*|cursor_to_xml\w*|set_config"
    r"|pg_read_server_files|pg_write_server_files|pg_execute_server_program"
    r"|standard_conforming_strings|backslash_quote)\b"
)
# Keywords refused in code (outside strings, quoted identifiers and comments).
_PG_DENIED_CODE: Final = (
    (re.compile(r"\bcopy\b"), "COPY (it reads and writes server files and runs programs)"),
    (re.compile(r"\bdo\b(?!\s+(?:nothing|update)\b)"), "DO blocks (code built at run time)"),
    (
        re.compile(r"\bexecute\b(?!\s+(?:function|procedure)\s+[\w.]+\s*\()"),
        "EXECUTE (SQL built at run time)",
    ),
    (re.compile(r"\b(?:set|reset)\s+(?:local\s+|session\s+)?role\b"), "SET ROLE"),
    (re.compile(r"\bsession\s+authorization\b"), "SESSION AUTHORIZATION"),
    (re.compile(r"^\s*load\b|;\s*load\b"), "LOAD (a server library)"),
    (re.compile(r"\balter\s+system\b"), "ALTER SYSTEM"),
    (re.compile(r"\b(?:create|alter|drop)\s+(?:or\s+replace\s+)?extension\b"), "extensions"),
    (
        re.compile(r"\bforeign\s+(?:data|table|schema)\b|\b(?:create|alter)\s+server\b"),
        "foreign servers",
    ),
    (re.compile(r"\buser\s+mapping\b"), "user mappings"),
    (
        re.compile(r"\b(?:create|alter|drop)\s+(?:role|user|group)\b"),
        "role changes",
    ),
    (re.compile(r"\blanguage\b(?!\s+(?:sql|plpgsql)\b)"), "function languages other than SQL"),
)
_PG_ROUTINE: Final = re.compile(r"\b(?:function|procedure)\b")
_PG_TOKEN: Final = re.compile(
    r"--[^\n]*|/\*|'|\"|\$([A-Za-z_][A-Za-z0-9_]*)?\$|[^-/'\"$]+|.", re.DOTALL
)


_QUOTED_NAME_END: Final = re.compile(r'(?:""|[^"])*"')
_STRING_END: Final = re.compile(r"(?:''|[^'])*'")
_ESCAPE_STRING_END: Final = re.compile(r"(?:\\.|''|[^'\\])*'", re.DOTALL)
_E_PREFIX: Final = re.compile(r"(?<![\w$])[eE]\Z")
_NESTED_COMMENT: Final = re.compile(r"/\*|\*/")


class _Unsure(Exception):
    """The statement text could not be read with certainty."""


def _string_end(sql: str, start: int) -> re.Pattern[str]:
    """The rest of the string or quoted name opening at ``start``: an ``E'...'`` string takes
    backslash escapes (``E`` alone before it, not the end of a word such as ``like``)."""
    if sql[start] == '"':
        return _QUOTED_NAME_END
    if _E_PREFIX.search(sql, 0, start) is not None:
        return _ESCAPE_STRING_END
    return _STRING_END


def _pg_code(sql: str, depth: int = 0) -> str:
    """``sql`` lowercased with comments, strings and quoted names blanked; dollar-quoted
    bodies kept (they are function code). Raises :class:`_Unsure` on anything unterminated."""
    if depth > 4:
        raise _Unsure("dollar quotes nested too deep")
    out: list[str] = []
    position = 0
    while position < len(sql):
        match = _PG_TOKEN.match(sql, position)
        assert match is not None
        piece, position = match.group(0), match.end()
        if piece.startswith("--"):
            out.append(" ")
        elif piece == "/*":
            level = 1
            while level:
                following = _NESTED_COMMENT.search(sql, position)
                if following is None:
                    raise _Unsure("an unterminated comment")
                level += 1 if following.group(0) == "/*" else -1
                position = following.end()
            out.append(" ")
        elif piece in ("'", '"'):
            ended = _string_end(sql, match.start()).match(sql, position)
            if ended is None:
                raise _Unsure("an unterminated string or quoted name")
            position = ended.end()
            out.append(" ")
        elif piece.startswith("$") and piece.endswith("$") and len(piece) > 1:
            close = sql.find(piece, position)
            if close < 0:
                raise _Unsure("an unterminated dollar-quoted body")
            out.append(" " + _pg_code(sql[position:close], depth + 1) + " ")
            position = close + len(piece)
        else:
            out.append(piece.lower())
    return "".join(out)


def postgres_refusal(sql: str) -> str | None:
    """Why ``sql`` may not run in a PostgreSQL sandbox, or None when it may."""
    lowered = sql.lower()
    if re.search(r"u&['\"]", lowered):
        return "it uses Unicode-escaped names or strings (U&), which hide what they name"
    name = _PG_DENIED_NAMES.search(lowered.replace('"', ""))
    if name is not None:
        return (
            f"it names {name.group(1)}, which reaches outside the database or changes who runs SQL"
        )
    try:
        code = _pg_code(sql)
    except _Unsure as exc:
        return f"it cannot be read with certainty ({exc})"
    # A function's body may be a string ('...' AS its code): read its strings as code too.
    texts = [code, lowered.replace('"', " ")] if _PG_ROUTINE.search(code) else [code]
    for pattern, what in _PG_DENIED_CODE:
        if any(pattern.search(text) for text in texts):
            return f"it uses {what}"
    return None


def later_statements(sql: str) -> list[str] | None:
    """The code of each statement of ``sql`` after the first (lowercased, strings and
    comments blanked), as PostgreSQL would run them — it runs a string of several as one;
    None when it cannot be read (postgres_refusal refuses it)."""
    try:
        code = _pg_code(sql)
    except _Unsure:
        return None
    return [part for part in code.split(";")[1:] if part.strip()]


POSTGRES_DENIED_FIX: Final = (
    "SQL in a sandbox reaches only the resource's own database: use INSERT ... SELECT "
    "instead of COPY, and no server files, programs, dynamic SQL or role changes"
)
