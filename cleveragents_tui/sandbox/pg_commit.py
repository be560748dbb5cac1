"""Whether a PostgreSQL COMMIT that a crash interrupted took effect, decided exactly.

A process killed while it commits leaves the outcome unknown to itself: the COMMIT may not
have reached the server (rolled back when the connection dropped), or it may have been
written just before the process died. So the transaction's id is recorded durably before
COMMIT (:func:`transaction_id`, ``txid_current()``), and a later process asks the server
(:func:`outcome`, ``pg_xact_status``): ``committed`` or ``aborted``, for certain.

While the dead process's backend has not yet noticed its client is gone, the transaction
is still ``in progress``. Nothing else can hold it (the sandbox's lock says its process has
ended), so that backend is terminated, waiting until it has exited: a backend committing
finishes its commit first (termination waits for the commit), one idle in its transaction
rolls it back. Then the status is final.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

Outcome = Literal["committed", "aborted"]
_XID_WRAP = 1 << 32
_TERMINATE_WAIT_MS = 10_000


def transaction_id(connection: Connection) -> int:
    """The id of the transaction open on ``connection`` (assigned now if it has none), with
    its epoch: unique for the life of the cluster."""
    return int(connection.exec_driver_sql("SELECT txid_current()").scalar_one())


def outcome(url: URL, txid: int) -> Outcome | None:
    """``committed`` or ``aborted``; None when the server cannot say (it no longer keeps
    the status of a transaction that old, or cannot be reached)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            status = _status(connection, txid)
            if status == "in progress":
                connection.execute(
                    text(
                        "SELECT pg_terminate_backend(pid, :wait) FROM pg_stat_activity "
                        "WHERE backend_xid::text::bigint = :xid AND pid <> pg_backend_pid()"
                    ),
                    {"wait": _TERMINATE_WAIT_MS, "xid": txid % _XID_WRAP},
                )
                status = _status(connection, txid)
    except SQLAlchemyError:
        return None
    finally:
        engine.dispose()
    if status in ("committed", "aborted"):
        return status  # type: ignore[return-value]
    return None


def _status(connection: Connection, txid: int) -> str | None:
    found = connection.execute(
        text("SELECT pg_xact_status(CAST(CAST(:txid AS text) AS xid8))"), {"txid": txid}
    ).scalar_one()
    connection.rollback()
    return None if found is None else str(found)
