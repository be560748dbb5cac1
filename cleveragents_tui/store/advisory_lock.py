"""PostgreSQL advisory locks: the run lease across hosts that share one database.

A session-level ``pg_try_advisory_lock`` is held by one connection kept open for the lease
(autocommit, so the lease never holds a transaction open); the server drops it when that
connection ends, so a crashed runner never leaves a plan held (engine/run/run_lease.py).
"""

from __future__ import annotations

import hashlib

from sqlalchemy import Connection, Engine, text

NAMESPACE = b"cleveragents run lease:"


def lock_key(name: str) -> int:
    """A signed 64-bit key for ``name`` (a plan id), as ``pg_advisory_lock`` takes."""
    digest = hashlib.blake2b(NAMESPACE + name.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def is_postgresql(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def try_lock(engine: Engine, name: str) -> Connection | None:
    """The connection now holding ``name``'s lock, or None when another session holds it."""
    connection = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    try:
        taken = connection.execute(
            text("SELECT pg_try_advisory_lock(:key)"), {"key": lock_key(name)}
        ).scalar_one()
    except BaseException:
        connection.close()
        raise
    if not taken:
        connection.close()
        return None
    return connection


def unlock(connection: Connection, name: str) -> None:
    """Release ``name``'s lock and the connection that held it."""
    try:
        connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": lock_key(name)})
    finally:
        connection.close()
