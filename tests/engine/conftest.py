"""A small world of real resources, one per sandbox strategy, for the checkpoint-group tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import DecisionType
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.store.store import Store

GIT = "local/repo"
FILES = "local/files"
DB = "local/db"
API = "local/api"
FILES_BUDGET = 6


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def make_git_repo(path: Path) -> Path:
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    _git(path, "config", "user.email", "t@example.invalid")
    _git(path, "config", "user.name", "Test")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('hello')\n")
    (path / "README.md").write_text("# demo\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "initial")
    return path


def make_directory(path: Path) -> Path:
    (path / "docs" / "deep").mkdir(parents=True)
    (path / "docs" / "guide.md").write_text("guide v1\n")
    (path / "docs" / "deep" / "logo.bin").write_bytes(bytes(range(256)) * 8)
    return path


def make_sqlite_target(path: Path) -> Path:
    import sqlite3

    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE greetings (id INTEGER PRIMARY KEY, text TEXT NOT NULL)")
        connection.execute("INSERT INTO greetings (text) VALUES ('hello')")
    return path


@dataclass
class World:
    store: Store
    plan: Plan
    root: Decision
    sandboxes: PlanSandboxes
    base: Path
    sequence: int = 1

    def decision(self, chosen: str, kind: str = "implementation_choice") -> Decision:
        decision = Decision(
            plan_id=self.plan.plan_id,
            parent_decision_id=self.root.decision_id,
            sequence_number=self.sequence,
            decision_type=kind,
            phase=DecisionType(kind).phase,
            question="what next?",
            chosen_option=chosen,
        )
        self.sequence += 1
        return decision

    def write_file(self, resource_id: str, relative: str, content: str) -> None:
        workdir = self.sandboxes.get(resource_id).workdir
        assert workdir is not None
        target = workdir / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        self.sandboxes.note_write(resource_id)

    def sql(self, statement: str) -> None:
        self.sandboxes.get(DB).execute(statement)  # type: ignore[attr-defined]
        self.sandboxes.note_write(DB)

    def rows(self) -> list[tuple[int, str]]:
        result = self.sandboxes.get(DB).execute("SELECT id, text FROM greetings ORDER BY id")  # type: ignore[attr-defined]
        return [tuple(r) for r in result]


@pytest.fixture
def world(tmp_path: Path, sqlite_store: Store) -> Iterator[World]:
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
            checkpoint_max_per_plan=FILES_BUDGET,
        ),
        Resource(
            resource_id=DB,
            kind="database",
            location=str(make_sqlite_target(tmp_path / "target.db")),
            sandbox_strategy="transaction_rollback",
        ),
        Resource(
            resource_id=API,
            kind="external",
            location="https://api.example.invalid",
            sandbox_strategy="none",
        ),
    ]
    plan = Plan(action="local/groups", phase="execute", state="running")
    root = Decision(
        plan_id=plan.plan_id,
        sequence_number=0,
        decision_type="prompt_definition",
        phase="strategize",
        question="goal?",
        chosen_option="change things",
    )
    with sqlite_store.unit_of_work(write=True) as uow:
        for resource in resources:
            uow.resources.add(resource)
        uow.plans.add(plan)
        uow.flush()
        uow.decisions.add(root)
        uow.commit()
    base = tmp_path / "sandboxes"
    sandboxes = PlanSandboxes(sqlite_store, plan.plan_id, base)
    for resource in resources:
        sandboxes.create(resource)
    yield World(sqlite_store, plan, root, sandboxes, base)
    for resource_id in sandboxes.open_ids():
        sandboxes.get(resource_id).discard()
