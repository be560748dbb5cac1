"""Errors a person can cause, each carrying one line that names the problem and the fix.

Interfaces print ``str(error)`` and exit with code 2; they never show a traceback for these.
"""

from __future__ import annotations


class UserError(Exception):
    """Something the user asked for cannot be done as asked; nothing was changed."""

    def __init__(self, problem: str, fix: str | None = None) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem}: {fix}" if fix else problem)


class InvalidIdError(UserError):
    """An identifier that is not well formed (a malformed ULID, a bad resource name)."""


class NotFoundError(UserError):
    """A well-formed identifier that names nothing in the store."""


class WrongPlanError(UserError):
    """A decision (or other record) that belongs to a different plan than the one named."""


class AmbiguousIdError(UserError):
    """An id prefix that matches more than one record."""


class StoreCorruptedError(UserError):
    """A stored row that cannot be read back (invalid JSON, an unknown enum value, ...)."""


class ImmutableRecordError(UserError):
    """An attempt to delete or edit a decision, or to supersede one twice."""


class DatabaseUnavailableError(UserError):
    """The database URL cannot be opened, or its schema is not the one this version needs."""


class ConcurrentChangeError(UserError):
    """Someone else changed the record since it was read (optimistic lock), or holds its lock."""
