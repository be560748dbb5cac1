"""Real resources of every sandbox strategy, and a tool context over the plan's sandboxes."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.actors.base import ToolContext, ToolOutcome
from cleveragents_tui.actors.tools import ToolRegistry, default_registry
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.store.store import Store
from tests.engine.conftest import make_directory, make_git_repo, make_sqlite_target
from tests.support.folders import add_database

PG = "local/pg"

GIT = "local/repo"
FILES = "local/files"
LAYERED = "local/layered"
DB = "local/db"
OUTBOX = "local/outbox"
API = "local/api"
CANARY = "canary: must never change\n"


@dataclass
class ToolWorld:
    tmp: Path
    sandboxes: PlanSandboxes
    plan: Plan
    registry: ToolRegistry
    canary: Path

    def context(self, phase: Phase = Phase.EXECUTE) -> ToolContext:
        return ToolContext(plan_id=self.plan.plan_id, phase=phase, sandboxes=self.sandboxes)

    def call(
        self, tool: str, arguments: Mapping[str, Any], phase: Phase = Phase.EXECUTE
    ) -> ToolOutcome:
        return self.registry.tool(tool).run(self.context(phase), arguments)

    def workdir(self, resource_id: str) -> Path:
        workdir = self.sandboxes.get(resource_id).workdir
        assert workdir is not None
        return workdir

    def outside(self) -> dict[str, str]:
        """A digest of every file outside the sandboxes (the real resources, the canary)."""
        found: dict[str, str] = {}
        for path in sorted(self.tmp.rglob("*")):
            relative = path.relative_to(self.tmp)
            top = relative.parts[0]
            if top == "sandboxes" or top.startswith(("agents.db", "target.db")):
                continue  # the sandboxes, our store, the database held by its transaction
            if path.is_dir() or path.is_symlink():
                continue
            found[relative.as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
        return found


@pytest.fixture
def tool_world(tmp_path: Path, sqlite_store: Store) -> Iterator[ToolWorld]:
    outbox = tmp_path / "outbox"
    outbox.mkdir()
    (outbox / "notes.txt").write_text("real folder, no sandbox\n")
    resources = [
        Resource(
            resource_id=GIT,
            kind="git",
            location=str(make_git_repo(tmp_path / "repo")),
            sandbox_strategy="git_worktree",
        ),
        Resource(
            resource_id=FILES,
            kind="filesystem",
            location=str(make_directory(tmp_path / "files")),
            sandbox_strategy="filesystem_copy",
        ),
        Resource(
            resource_id=LAYERED,
            kind="filesystem",
            location=str(make_directory(tmp_path / "layered")),
            sandbox_strategy="overlay",
        ),
        Resource(
            resource_id=DB,
            kind="database",
            location=str(make_sqlite_target(tmp_path / "target.db")),
            sandbox_strategy="transaction_rollback",
        ),
        Resource(
            resource_id=OUTBOX, kind="external", location=str(outbox), sandbox_strategy="none"
        ),
        Resource(
            resource_id=API,
            kind="external",
            location="https://api.example.invalid",
            sandbox_strategy="none",
        ),
    ]
    plan = Plan(action="local/tools", phase="execute", state="running")
    with sqlite_store.unit_of_work(write=True) as uow:
        for resource in resources:
            uow.resources.add(resource)
        uow.plans.add(plan)
        uow.commit()
    canary = tmp_path / "canary.txt"
    canary.write_text(CANARY)
    sandboxes = PlanSandboxes(sqlite_store, plan.plan_id, tmp_path / "sandboxes")
    for resource in resources:
        sandboxes.create(resource)
    yield ToolWorld(tmp_path, sandboxes, plan, default_registry(), canary)
    for resource_id in sandboxes.open_ids():
        sandboxes.get(resource_id).discard()


def postgres_world(
    store: Store, tmp_path: Path, url: str, phase: Phase, *setup: str
) -> tuple[PlanSandboxes, Plan]:
    """A plan in ``phase`` with the PostgreSQL database at ``url`` (after the ``setup``
    statements) registered as ``PG`` and its sandbox made; discard it when done."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            for statement in setup:
                connection.execute(text(statement))
    finally:
        engine.dispose()
    resource = add_database(store, PG, url)
    plan = Plan(action="local/tools", phase=phase, state="running")
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.commit()
    sandboxes = PlanSandboxes(store, plan.plan_id, tmp_path / "sandboxes")
    sandboxes.create(resource)
    return sandboxes, plan


def savepoint_world(
    store: Store, tmp_path: Path, url: str, phase: Phase, *setup: str
) -> tuple[PlanSandboxes, Plan]:
    """:func:`postgres_world` with the sandbox a server that cannot copy gets (a login
    without CREATEDB): one open transaction with savepoints, made here as it makes it."""
    from cleveragents_tui.engine.core.sandboxes import sandbox_root
    from cleveragents_tui.sandbox.transaction import (
        TransactionRollbackSandbox,
        TransactionRollbackStrategy,
    )

    made, plan = postgres_world(store, tmp_path, url, phase, *setup)
    made.get(PG).discard()
    with store.unit_of_work() as uow:
        resource = uow.resources.get(PG)
    root = sandbox_root(tmp_path / "sandboxes", plan.plan_id, PG)
    assert TransactionRollbackStrategy().create(resource, plan.plan_id, root).hand_over()
    sandboxes = PlanSandboxes(store, plan.plan_id, tmp_path / "sandboxes")
    assert isinstance(sandboxes.get(PG), TransactionRollbackSandbox)
    return sandboxes, plan
