# Over 500 lines: PostgresCopySandbox is one ~475-line state machine; landing is postgres_land.
"""A PostgreSQL database sandbox that any process can roll back exactly: copies of the database.

The savepoint sandbox (``transaction/``) lives in one connection of one process,
so each later process (each CLI command is one) *replayed* its statement log, and a schema
with ``DEFAULT now()``, ``random()``, ``gen_random_uuid()`` or a sequence replayed to other
rows: corrections were refused ("was lost on restart ... rows differ") and Apply landed
nothing. This sandbox keeps the rows the plan produced instead, as databases on the target's
server made with ``CREATE DATABASE ... TEMPLATE`` (a copy of the files: rows, sequence
values, schema, everything), named ``agents_<prefix>_<what>``:

* ``..._base``: the target as it was when the sandbox was made;
* ``..._work``: where tools run their SQL (:meth:`PostgresCopySandbox.execute`), each
  statement in a transaction of its own on a connection of its own, committed at once: no
  connection outlives an operation, so the next process finds the database as it was left;
* ``..._sp_<hex>``: one copy of ``work`` per checkpoint. :meth:`~PostgresCopySandbox.rollback`
  copies it to ``..._next``, drops ``work`` and renames ``next`` to ``work``; an operation
  that finds ``next`` finishes or undoes that (a crash leaves the old or the new rows).

Under ``root``: ``postgres_copy.json`` (resource, plan, prefix, valid checkpoints, open or
applied; no URL, so no credentials) and ``postgres_copy.flock``, held during each operation.
Copying needs that nobody else is connected to the database copied (PostgreSQL's rule for a
template), and the role needs ``CREATEDB`` and to own the target: ``database.py`` falls back
to the savepoint sandbox when either is missing. The statements ``CREATE DATABASE``, ``DROP
DATABASE`` and the like run from the server's ``postgres`` database (or ``template1``).

Apply (``postgres_land.py``) runs the plan's schema statements again (the state file logs
each ``CREATE``/``ALTER``/``DROP``/... that ran in ``work``; a rollback cuts the log back to
its checkpoint) and writes the rows that differ between ``base`` and ``work`` into the
target in one transaction, after checking that nothing the plan changed was changed in the
target meanwhile; on a conflict or error nothing lands. Then ``base`` and ``work`` are
dropped; the checkpoint copies stay for diffs until the sandbox is discarded.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import psycopg
from psycopg import sql
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.sandbox import postgres_land
from cleveragents_tui.sandbox.base import Change, CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.copy_sandbox import (
    CopySandbox,
    CopyState,
    CopyStrategy,
    Params,
    ReadResult,
)
from cleveragents_tui.sandbox.database_common import owned_state
from cleveragents_tui.sandbox.landing import LandConflictError, Landed
from cleveragents_tui.sandbox.safety import check_savepoint_name, new_savepoint_name
from cleveragents_tui.sandbox.sql_confinement import POSTGRES_DENIED_FIX, postgres_refusal
from cleveragents_tui.sandbox.transaction.connection import (
    TRANSACTION_CONTROL,
    first_line,
    target_of_kind,
)
from cleveragents_tui.sandbox.transaction.core import SqlStatementError
from cleveragents_tui.sandbox.transaction.snapshots import (
    PG_TABLES,
    Snapshot,
    Table,
    compare,
    key_rows,
    path_part,
)

log = logging.getLogger(__name__)

STATE_FILE_NAME: Final = "postgres_copy.json"
LOCK_FILE_NAME: Final = "postgres_copy.flock"
_PREFIX = re.compile(r"^[0-9a-f]{12}$")
_MAINTENANCE: Final = ("postgres", "template1")
# Objects of the whole server, outside the sandbox's database: a statement naming them would
# reach the real database (or every database), so it is refused. When unsure, refused.
_SERVER_OBJECTS = re.compile(
    r"\b(?:create|alter|drop|comment\s+on|security\s+label\s+on)\s+(?:database|tablespace)\b"
    r"|\b(?:grant|revoke)\b[^;]*?\bon\s+(?:database|tablespace)\b"
    r"|\bpg_(?:terminate|cancel)_backend\b|\breassign\s+owned\b",
    re.IGNORECASE | re.DOTALL,
)
# A statement that changes the schema: logged, so that Apply can run it on the target.
_SCHEMA_STATEMENT = re.compile(
    r"^\s*(?:(?:--[^\n]*(?:\n|$)|/\*.*?\*/)\s*)*"
    r"(CREATE|ALTER|DROP|COMMENT|GRANT|REVOKE|SECURITY\s+LABEL)\b",
    re.IGNORECASE | re.DOTALL,
)
# SQLSTATEs that mean "this server cannot copy the database for us": object in use (others
# are connected to the template), insufficient privilege (no CREATEDB, not the owner).
_CANNOT_COPY: Final = frozenset({"55006", "42501"})


def _refusal(sql_text: str) -> str | None:
    """Why ``sql_text`` may not run in the copy (nor, at Apply, on the target), or None."""
    why = postgres_refusal(sql_text)
    if why is None and _SERVER_OBJECTS.search(sql_text):
        why = "it names a database, a tablespace or another session, outside the sandbox"
    return why


class CopyUnavailableError(SandboxError):
    """The target cannot be copied on its server (others connected, or no privilege)."""


@dataclass(kw_only=True)
class _State(CopyState):
    STRATEGY = "postgres_copy"

    prefix: str
    replacing: bool = False  # a rollback is replacing ``work``: the next operation settles it
    # The schema statements run in ``work``, in order (Apply runs them again), and how many
    # of them each checkpoint had seen (a rollback cuts the list back to that).
    schema_log: list[str] = field(default_factory=list)
    schema_at: dict[str, int] = field(default_factory=dict)

    def forget(self, ref: str) -> None:
        super().forget(ref)
        self.schema_at.pop(ref, None)

    @classmethod
    def _parse_more(cls, data: dict[str, Any]) -> dict[str, Any]:
        prefix = str(data["prefix"])
        if not _PREFIX.match(prefix):
            raise ValueError(f"bad prefix {prefix!r}")
        return {
            "prefix": prefix,
            "replacing": bool(data.get("replacing", False)),
            "schema_log": [str(statement) for statement in data.get("schema_log", [])],
            "schema_at": {
                check_savepoint_name(str(ref)): int(count)
                for ref, count in data.get("schema_at", {}).items()
            },
        }


def _conninfo(url: URL, database: str) -> str:
    """A libpq URI for ``database`` on the target's server, with the target's login."""
    return url.set(drivername="postgresql", database=database).render_as_string(hide_password=False)


def _snapshot(url: URL, database: str, max_rows: int) -> Snapshot | None:
    """Every user table's rows of ``database`` keyed as ``transaction_rollback`` keys them;
    None above ``max_rows`` rows."""
    engine = create_engine(url.set(database=database), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            result: Snapshot = {}
            remaining = max_rows
            for schema, table, is_default, pk in connection.execute(PG_TABLES).all():
                path = path_part(table) if is_default else f"{path_part(schema)}.{path_part(table)}"
                query = sql.SQL("SELECT * FROM {}").format(sql.Identifier(schema, table))
                raw: Any = connection.connection.dbapi_connection
                rows_result = connection.exec_driver_sql(query.as_string(raw))
                columns = tuple(rows_result.keys())
                keyed = key_rows(rows_result, [columns.index(c) for c in pk], remaining)
                if keyed is None:
                    return None
                rows, remaining = keyed
                result[path] = Table(columns, rows)
            return dict(sorted(result.items()))
    finally:
        engine.dispose()


class PostgresCopySandbox(CopySandbox[_State, URL]):
    """A PostgreSQL target's sandbox as a copy of its database; checkpoints are copies too.

    Keeps no transaction between calls: every process sees and changes the same databases,
    one operation at a time (``flock``). ``workdir`` is None: tools reach it through SQL.
    """

    _prefix: str | None = None  # the databases' (the state file's), once known

    @property
    def dialect(self) -> str:
        return "postgresql"

    # -- databases and locking -------------------------------------------------------------

    @staticmethod
    def database(prefix: str, what: str) -> str:
        """The name of one of the sandbox's databases (``what``: base, work, next, sp_<hex>)."""
        return f"agents_{prefix}_{what}"

    def _name(self, state: _State, what: str) -> str:
        return self.database(state.prefix, what)

    @contextlib.contextmanager
    def _admin(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        """An autocommit connection to the server's maintenance database, for CREATE and
        DROP DATABASE (which cannot run while connected to the database they copy or drop)."""
        errors = []
        for name in _MAINTENANCE:
            try:
                connection = psycopg.connect(_conninfo(self._target, name), autocommit=True)
            except psycopg.Error as exc:
                errors.append(first_line(exc))
                continue
            try:
                yield connection
            finally:
                connection.close()
            return
        raise SandboxError(
            f"cannot reach the server of {self._resource.resource_id} to copy its database: "
            f"{'; '.join(errors)}",
            "let the resource's login connect to the postgres (or template1) database",
        )

    @staticmethod
    def _existing(admin: psycopg.Connection[tuple[Any, ...]], names: Sequence[str]) -> set[str]:
        found = admin.execute(
            "SELECT datname FROM pg_database WHERE datname = ANY(%s)", (list(names),)
        ).fetchall()
        return {str(row[0]) for row in found}

    @staticmethod
    def _copy(admin: psycopg.Connection[tuple[Any, ...]], source: str, copy: str) -> None:
        admin.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(copy), sql.Identifier(source)
            )
        )

    @staticmethod
    def _drop(admin: psycopg.Connection[tuple[Any, ...]], name: str) -> None:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )

    def _settle(self, state: _State) -> None:
        """Finish or undo a rollback a crash interrupted (``next`` left behind)."""
        if not state.replacing:
            return
        work, following = self._name(state, "work"), self._name(state, "next")
        with self._admin() as admin:
            present = self._existing(admin, [work, following])
            if following not in present:
                return
            if work in present:  # the old rows are still there: the rollback never happened
                self._drop(admin, following)
            else:
                admin.execute(
                    sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                        sql.Identifier(following), sql.Identifier(work)
                    )
                )
        state.replacing = False
        self._save(state)

    STATE_FILE_NAME = STATE_FILE_NAME
    LOCK_FILE_NAME = LOCK_FILE_NAME

    def _load_state(self) -> _State | None:
        return _State.load(self._root / STATE_FILE_NAME)

    def _opened(self, state: _State) -> None:
        self._prefix = state.prefix

    def _failed(self, doing: str, exc: BaseException) -> SandboxError:
        return SandboxError(
            f"cannot {doing} the sandbox of {self._resource.resource_id}: {first_line(exc)}",
            "check that the database server is reachable, then retry",
        )

    def _engine_for_work(self, state: _State) -> Engine:
        """Connections to the working copy, one per statement: none stays open between
        operations, so a checkpoint or rollback may copy or replace the database."""
        if self._engine is None:
            application_name = f"cleveragents sandbox {self._plan_id}"[:63]
            self._engine = create_engine(
                self._target.set(database=self._name(state, "work")),
                poolclass=NullPool,
                connect_args={"application_name": application_name},
            )
        return self._engine

    # -- the tool-facing API ---------------------------------------------------------------

    def _execute(self, sql_text: str, params: Params) -> ReadResult:
        """In a transaction of its own. Refused: transaction control, statements that reach
        outside the database (``sql_confinement.py``) and statements on databases or
        tablespaces."""
        first = " ".join(sql_text.split())[:80]
        if TRANSACTION_CONTROL.match(sql_text):
            raise SqlStatementError(
                f"statement {first!r} refused in the sandbox of {self._resource.resource_id}",
                "the sandbox owns its database: checkpoints, rollback, apply and discard go "
                "through the plan, not through SQL",
            )
        why = _refusal(sql_text)
        if why is not None:
            raise SqlStatementError(
                f"statement {first!r} refused in the sandbox of {self._resource.resource_id}: "
                f"{why}",
                POSTGRES_DENIED_FIX,
            )
        schema = _SCHEMA_STATEMENT.match(sql_text) is not None
        if schema and params:
            raise SqlStatementError(
                f"statement {first!r} refused in the sandbox of {self._resource.resource_id}: "
                "a schema statement takes no parameters",
                "write its values into the statement",
            )
        with self._operation() as state:
            if state.status == "applied":
                raise self._applied()
            self._settle(state)
            try:
                with self._engine_for_work(state).connect() as connection, connection.begin():
                    result = connection.execute(text(sql_text), params)
                    # Read every row now: the connection closes with this operation.
                    read = ReadResult.whole(result)
            except SQLAlchemyError as exc:
                raise SqlStatementError(
                    f"SQL failed in the sandbox of {self._resource.resource_id}: {first_line(exc)}"
                ) from exc
            finally:
                self._close()
            if schema:  # committed: Apply runs it again on the target
                state.schema_log.append(sql_text)
                self._save(state)
            return read

    # -- the Sandbox protocol --------------------------------------------------------------

    def checkpoint(self) -> str:
        """A copy of the working database; returns its reference (``sp_<hex>``)."""
        with self._operation() as state:
            if state.status == "applied":
                raise self._applied()
            ref = new_savepoint_name()
            try:
                self._settle(state)
                with self._admin() as admin:
                    self._copy(admin, self._name(state, "work"), self._name(state, ref))
                state.checkpoints.append(ref)
                state.schema_at[ref] = len(state.schema_log)
                self._save(state)
            except (psycopg.Error, OSError) as exc:
                raise self._failed("checkpoint", exc) from exc
            return ref

    def _require(self, state: _State, ref: str) -> str:
        if state.status == "applied":
            raise self._applied()
        if check_savepoint_name(ref) not in state.checkpoints:
            raise CheckpointMissingError(
                f"checkpoint {ref} of resource {self._resource.resource_id} is not a "
                "checkpoint of this sandbox (dropped, or rolled back over)",
                "pick a checkpoint of the current attempt",
            )
        return self._name(state, ref)

    def verify(self, ref: str) -> None:
        """Valid while its copy exists on the server."""
        with self._operation() as state:
            name = self._require(state, ref)
            try:
                with self._admin() as admin:
                    present = name in self._existing(admin, [name])
            except psycopg.Error as exc:
                raise self._failed("verify", exc) from exc
            if not present:
                raise CheckpointMissingError(
                    f"checkpoint {ref} of resource {self._resource.resource_id} is missing: "
                    f"its database {name} was dropped",
                    "roll back to an earlier checkpoint",
                )

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        """Make the working database a copy of checkpoint ``ref`` again; ``ref`` stays valid,
        and so do later checkpoints' copies until they are dropped."""
        del current
        with self._operation() as state:
            source = self._require(state, ref)
            work, following = self._name(state, "work"), self._name(state, "next")
            try:
                self._settle(state)
                state.replacing = True
                self._save(state)
                with self._admin() as admin:
                    self._drop(admin, following)
                    self._copy(admin, source, following)
                    self._drop(admin, work)
                    admin.execute(
                        sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                            sql.Identifier(following), sql.Identifier(work)
                        )
                    )
                state.replacing = False
                del state.schema_log[state.schema_at.get(ref, len(state.schema_log)) :]
                self._save(state)
            except (psycopg.Error, OSError) as exc:
                raise SandboxError(
                    f"cannot roll {self._resource.resource_id} back to {ref}: {first_line(exc)}",
                    "retry; the working copy is either as it was or as the checkpoint",
                ) from exc

    def _rows(self, database: str, what: str) -> Snapshot:
        try:
            taken = _snapshot(self._target, database, self._max_rows)
        except SQLAlchemyError as exc:
            raise SandboxError(
                f"cannot read the rows of {self._resource.resource_id} at {what}: "
                f"{first_line(exc)}",
                "check that the database server is reachable",
            ) from exc
        if taken is None:
            raise SandboxError(
                f"cannot list the rows of {self._resource.resource_id} at {what}: more than "
                f"{self._max_rows} rows",
                f"compare the databases {database} and the target with psql",
            )
        return taken

    def _rows_at(self, state: _State, ref: str) -> Snapshot:
        if check_savepoint_name(ref) not in state.checkpoints:
            raise CheckpointMissingError(
                f"checkpoint {ref} of resource {self._resource.resource_id} was dropped",
                "pick a checkpoint of the current attempt",
            )
        return self._rows(self._name(state, ref), f"checkpoint {ref}")

    def _changes(self, state: _State) -> list[Change]:
        return compare(
            self._rows(self._name(state, "base"), "creation"),
            self._rows(self._name(state, "work"), "present"),
        )

    def changes_since_baseline(self) -> list[Change]:
        """Row changes of the working copy against the target at creation."""
        with self._operation() as state:
            if state.status == "applied":
                raise self._applied()
            self._settle(state)
            return self._changes(state)

    def pending_changes(self) -> list[Change]:
        """As ``changes_since_baseline``, without settling a rollback a crash interrupted:
        the present rows are in ``next`` when it replaced ``work`` but was not renamed."""
        with self._operation() as state:
            if state.status == "applied":
                raise self._applied()
            present = self._name(state, "work")
            if state.replacing:
                following = self._name(state, "next")
                with self._admin() as admin:
                    found = self._existing(admin, [present, following])
                if present not in found and following in found:
                    present = following
            return compare(
                self._rows(self._name(state, "base"), "creation"), self._rows(present, "present")
            )

    def _drop_copy(self, state: _State, ref: str) -> None:
        try:
            with self._admin() as admin:
                self._drop(admin, self._name(state, ref))
        except psycopg.Error as exc:  # forgotten already; discard drops it later
            log.warning("cannot drop the checkpoint database of %s: %s", ref, exc)

    def _land(self, state: _State) -> Landed:
        """The rows the plan produced, after its schema statements (``postgres_land.py``)."""
        for statement in state.schema_log:  # checked when run; the state file is only a file
            why = _refusal(statement)
            if why is not None:
                raise LandConflictError(
                    f"its logged schema statement {' '.join(statement.split())[:80]!r} is "
                    f"refused: {why}"
                )
        url = self._target
        try:
            with (
                psycopg.connect(_conninfo(url, self._name(state, "base"))) as base,
                psycopg.connect(_conninfo(url, self._name(state, "work"))) as final,
                psycopg.connect(_conninfo(url, str(url.database))) as target,
            ):
                for connection in (base, final):
                    connection.read_only = True
                target.autocommit = True  # the landing transaction is opened explicitly
                return postgres_land.land(target, base, final, state.schema_log)
        except psycopg.Error as exc:
            raise self._refused("PostgreSQL", first_line(exc)) from exc

    def _drop_copies(self, state: _State) -> None:
        """``base`` and ``work`` (and a ``next`` left behind); the checkpoints stay for diffs."""
        with contextlib.suppress(psycopg.Error, SandboxError), self._admin() as admin:
            for what in ("base", "work", "next"):
                self._drop(admin, self._name(state, what))

    def discard(self) -> None:
        """Drop the sandbox's databases and remove its files; the target is untouched.
        Idempotent."""
        with self._lock:
            self._close()
            prefix = self._prefix
            if prefix is None:
                with contextlib.suppress(SandboxError):
                    loaded = _State.load(self._root / STATE_FILE_NAME)
                    prefix = None if loaded is None else loaded.prefix
            if prefix is not None:
                self._drop_all(prefix)
            for name in (STATE_FILE_NAME, LOCK_FILE_NAME):
                (self._root / name).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self._root.rmdir()  # only when empty: root may hold other things

    def _drop_all(self, prefix: str) -> None:
        """Drop every database named ``agents_<prefix>_...`` (a crash may have left some)."""
        pattern = f"agents\\_{prefix}\\_%"  # the prefix is hex: nothing else to escape
        try:
            with self._admin() as admin:
                found = admin.execute(
                    "SELECT datname FROM pg_database WHERE datname LIKE %s", (pattern,)
                ).fetchall()
                for (name,) in found:
                    self._drop(admin, str(name))
        except (psycopg.Error, SandboxError) as exc:
            raise SandboxError(
                f"cannot drop the sandbox databases agents_{prefix}_* of "
                f"{self._resource.resource_id}: {first_line(exc)}",
                "drop them with psql (DROP DATABASE), or retry when the server is reachable",
            ) from exc


def is_copy_sandbox(root: Path) -> bool:
    """Whether ``root`` holds a :class:`PostgresCopySandbox` (its state file)."""
    return (root / STATE_FILE_NAME).is_file()


class PostgresCopyStrategy(CopyStrategy):
    """Makes :class:`PostgresCopySandbox` objects for PostgreSQL targets (``database.py``)."""

    def _url(self, resource: Resource) -> URL:
        return target_of_kind(
            resource,
            "postgresql",
            "PostgreSQL database",
            "set its location to postgresql://USER@HOST/DATABASE",
        )

    def create(self, resource: Resource, plan_id: str, root: Path) -> PostgresCopySandbox:
        """Copy the target on its server. Refused while an open sandbox is there; raises
        :class:`CopyUnavailableError` when the server cannot copy it."""
        url = self._url(resource)
        _State.refuse_open(resource, root, STATE_FILE_NAME)
        sandbox = PostgresCopySandbox(resource, plan_id, root, url, self.max_snapshot_rows)
        sandbox.discard()
        prefix = secrets.token_hex(6)
        base = PostgresCopySandbox.database(prefix, "base")
        try:
            root.mkdir(parents=True, exist_ok=True)
            # First: a process killed while copying leaves a state naming the databases to
            # drop (discard, or the engine clearing an interrupted sandbox, drops them).
            state = _State(
                resource_id=resource.resource_id,
                plan_id=plan_id,
                prefix=prefix,
                created_at=utc_now().isoformat(),
            )
            state.save(root / STATE_FILE_NAME)
            with sandbox._admin() as admin:
                try:
                    sandbox._copy(admin, str(url.database), base)
                except psycopg.Error as exc:
                    if exc.sqlstate in _CANNOT_COPY:
                        raise CopyUnavailableError(
                            f"cannot copy the database {url.database} of resource "
                            f"{resource.resource_id}: {first_line(exc)}",
                            "close other connections to it, or give its login CREATEDB and "
                            "ownership of it",
                        ) from exc
                    raise
                sandbox._copy(admin, base, PostgresCopySandbox.database(prefix, "work"))
        except BaseException as exc:
            with contextlib.suppress(SandboxError):
                sandbox._drop_all(prefix)
            (root / STATE_FILE_NAME).unlink(missing_ok=True)
            if isinstance(exc, psycopg.Error | OSError):
                raise SandboxError(
                    f"cannot copy the database of resource {resource.resource_id} on its "
                    f"server: {first_line(exc)}",
                    "check that the server is reachable and its login may create databases",
                ) from exc
            raise
        return sandbox

    def open(self, resource: Resource, plan_id: str, root: Path) -> PostgresCopySandbox:
        """The sandbox ``create`` made (in any process)."""
        state = owned_state(
            _State.load(root / STATE_FILE_NAME), resource, plan_id, root, "database"
        )
        sandbox = PostgresCopySandbox(
            resource, plan_id, root, self._url(resource), self.max_snapshot_rows
        )
        sandbox._prefix = state.prefix
        return sandbox
