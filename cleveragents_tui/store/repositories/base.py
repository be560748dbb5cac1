"""What every repository shares: the unit of work's session, and ids given by prefix."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.errors import AmbiguousIdError, InvalidIdError, NotFoundError
from cleveragents_tui.domain.ids import ULID_LENGTH, is_ulid_prefix, parse_ulid
from cleveragents_tui.store.tables import Base

MIN_PREFIX = 4
CHUNK = 500  # ids per IN (...) query

RowT = TypeVar("RowT", bound=Base)
T = TypeVar("T")


class Repository:
    """Reads and writes one aggregate's rows in the unit of work's session (its transaction)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def _get(self, table: type[RowT], key: str, what: str, fix: str | None = None) -> RowT:
        """The row of ``table`` with primary key ``key``; NotFoundError "{what} {key} ..."."""
        row = self._session.get(table, key)
        if row is None:
            raise NotFoundError(f"{what} {key} does not exist", fix)
        return row

    def _list(self, query: Select[RowT], convert: Callable[[RowT], T]) -> list[T]:
        """The rows ``query`` selects, each converted (``mapping.*_from_row``)."""
        return [convert(row) for row in self._session.scalars(query)]

    def _count_by(
        self, column: InstrumentedAttribute[str], *where: ColumnElement[bool]
    ) -> dict[str, int]:
        """How many rows have each value of ``column`` (of the rows ``where`` selects)."""
        query = select(column, func.count()).where(*where).group_by(column)
        return {str(value): int(n) for value, n in self._session.execute(query)}


def resolve_id(
    session: Session, column: InstrumentedAttribute[str], ref: str, what: str, how_to_list: str
) -> str:
    """A full ULID, or a unique prefix of at least MIN_PREFIX characters (like git's short SHAs)."""
    text = ref.strip().upper()
    if len(text) == ULID_LENGTH:
        return parse_ulid(text, what)
    if not is_ulid_prefix(text) or len(text) < MIN_PREFIX:
        raise InvalidIdError(
            f"{what} '{shorten(ref)}' is not a valid ULID or ULID prefix",
            f"give the 26-character id or at least {MIN_PREFIX} of its first characters",
        )
    # Crockford base32 has no '%' or '_', so the prefix cannot act as a LIKE wildcard.
    matches = list(session.scalars(select(column).where(column.like(f"{text}%")).limit(2)))
    if not matches:
        raise NotFoundError(f"no {what} starts with {text}", how_to_list)
    if len(matches) > 1:
        raise AmbiguousIdError(
            f"{what} prefix {text} matches more than one", "give more characters"
        )
    return str(matches[0])
