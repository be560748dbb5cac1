"""A folder or a database registered as a plan resource, as ``agents resource add --kind
filesystem`` (``--kind database``) does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store.store import Store


def add_folder(store: Store, resource_id: str, folder: Path, **settings: Any) -> None:
    """Register ``folder`` (made if missing) as ``resource_id``, sandboxed by copy
    (filesystem_copy); ``settings`` are other fields of the resource."""
    folder.mkdir(parents=True, exist_ok=True)
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id=resource_id,
                kind="filesystem",
                location=str(folder),
                sandbox_strategy="filesystem_copy",
                **settings,
            )
        )
        uow.commit()


def add_database(store: Store, resource_id: str, location: str) -> Resource:
    """Register the database at ``location`` (a SQLite file or a PostgreSQL URL) as
    ``resource_id``; its sandbox is a copy (transaction_rollback)."""
    resource = Resource(
        resource_id=resource_id,
        kind="database",
        location=location,
        sandbox_strategy="transaction_rollback",
    )
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(resource)
        uow.commit()
    return resource
