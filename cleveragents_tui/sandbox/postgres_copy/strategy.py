"""Makes and reopens PostgreSQL copy sandboxes (``database.py`` picks this strategy).

Creating copies the target with ``CREATE DATABASE ... TEMPLATE``; a server that cannot
(others connected, no privilege) raises :class:`CopyUnavailableError`, and ``database.py``
falls back to the savepoint sandbox.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path
from typing import Final

import psycopg
from sqlalchemy.engine import URL

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.copy_sandbox import CopyStrategy
from cleveragents_tui.sandbox.database_common import owned_state
from cleveragents_tui.sandbox.postgres_copy.sandbox import PostgresCopySandbox
from cleveragents_tui.sandbox.postgres_copy.state import STATE_FILE_NAME, State
from cleveragents_tui.sandbox.transaction.connection import first_line, target_of_kind

# SQLSTATEs that mean "this server cannot copy the database for us": object in use (others
# are connected to the template), insufficient privilege (no CREATEDB, not the owner).
_CANNOT_COPY: Final = frozenset({"55006", "42501"})


class CopyUnavailableError(SandboxError):
    """The target cannot be copied on its server (others connected, or no privilege)."""


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
        State.refuse_open(resource, plan_id, root, STATE_FILE_NAME)
        sandbox = PostgresCopySandbox(resource, plan_id, root, url, self.max_snapshot_rows)
        sandbox.discard()
        prefix = secrets.token_hex(6)
        base = PostgresCopySandbox.database(prefix, "base")
        try:
            root.mkdir(parents=True, exist_ok=True)
            # First: a process killed while copying leaves a state naming the databases to
            # drop (discard, or the engine clearing an interrupted sandbox, drops them).
            state = State(
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
            State.load(root / STATE_FILE_NAME, plan_id), resource, plan_id, root, "database"
        )
        sandbox = PostgresCopySandbox(
            resource, plan_id, root, self._url(resource), self.max_snapshot_rows
        )
        sandbox._prefix = state.prefix
        return sandbox
