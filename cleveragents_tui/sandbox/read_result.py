"""What a statement in a database sandbox gives back, read whole before its connection
closes: the parts of a SQLAlchemy result that ``local/run-sql`` and ``local/query-sql`` use."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import CursorResult

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]] | None


@dataclass
class ReadResult:
    """A statement's outcome, read whole inside the operation (the parts of a SQLAlchemy
    result that ``local/run-sql`` uses)."""

    returns_rows: bool
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]
    rowcount: int

    @classmethod
    def whole(cls, result: CursorResult[Any], limit: int | None = None) -> ReadResult:
        """Every row of ``result`` now (at most ``limit``): its connection closes with the
        operation."""
        rows: list[tuple[Any, ...]] = []
        if result.returns_rows:
            found = result if limit is None else result.fetchmany(limit)
            rows = [tuple(row) for row in found]
        return cls(
            result.returns_rows,
            tuple(result.keys()) if result.returns_rows else (),
            rows,
            result.rowcount,
        )

    def keys(self) -> tuple[str, ...]:
        return self.columns

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self.all())

    def all(self) -> list[tuple[Any, ...]]:
        taken, self.rows = self.rows, []
        return taken

    def fetchmany(self, size: int) -> list[tuple[Any, ...]]:
        taken, self.rows = self.rows[:size], self.rows[size:]
        return taken

    def close(self) -> None:
        self.rows = []
