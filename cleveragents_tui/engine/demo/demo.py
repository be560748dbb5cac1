"""``agents demo``: a fresh demo project — a git repository, an app database, a docs folder,
a team chat outbox — registered as resources, with the demo action written beside them.

Each demo gets its own resource namespace (``demo-<hex>``), so demos never collide.
"""

from __future__ import annotations

import secrets
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.resources import data_path
from cleveragents_tui.store.store import Store

TEMPLATE = ("assets", "demo", "add-greeting.action.yaml")
PROJECT = ("assets", "demo", "hello-cli")


@dataclass(frozen=True)
class DemoEnvironment:
    directory: Path
    namespace: str
    repository: Path
    database: Path
    docs: Path
    outbox: Path
    action_file: Path
    resources: tuple[Resource, ...]


def _git(repository: Path, *args: str) -> None:
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=cleveragents demo",
            "-c",
            "user.email=demo@cleveragents.invalid",
            "-C",
            str(repository),
            *args,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )


def build_demo(store: Store, directory: Path) -> DemoEnvironment:
    directory = directory.expanduser().resolve()
    if directory.exists() and any(directory.iterdir()):
        raise UserError(
            f"demo folder {directory} is not empty", "choose a new or empty folder with --dir"
        )
    directory.mkdir(parents=True, exist_ok=True)
    namespace = f"demo-{secrets.token_hex(3)}"
    repository = directory / "hello-cli"
    shutil.copytree(data_path(*PROJECT), repository)
    # As in any Python project: the test runs' bytecode is never part of an applied branch.
    (repository / ".gitignore").write_text("__pycache__/\n*.pyc\n", encoding="utf-8")
    _git(repository, "init", "-q", "-b", "main")
    _git(repository, "add", "-A")
    _git(repository, "commit", "-q", "-m", "hello-cli 1.0.0")
    database = directory / "app.db"
    with sqlite3.connect(database) as connection:
        connection.execute(
            "CREATE TABLE releases (id INTEGER PRIMARY KEY, version TEXT NOT NULL, notes TEXT)"
        )
        connection.execute(
            "INSERT INTO releases (version, notes) VALUES ('1.0.0', 'first release')"
        )
    connection.close()
    docs = directory / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# hello-cli guide\n", encoding="utf-8")
    outbox = directory / "team-chat"
    outbox.mkdir()
    template = data_path(*TEMPLATE).read_text("utf-8")
    action_file = directory / "add-greeting.action.yaml"
    action_file.write_text(
        template.replace("@NS@", namespace).replace("@PYTHON@", sys.executable), encoding="utf-8"
    )
    rows = (  # name, kind, location, sandbox strategy
        ("hello-cli", "git", repository, "git_worktree"),
        ("app-db", "database", database, "transaction_rollback"),
        ("docs", "filesystem", docs, "filesystem_copy"),
        ("team-chat", "external", outbox, "none"),
    )
    resources = tuple(
        Resource(
            resource_id=f"{namespace}/{name}",
            kind=kind,
            location=str(location),
            sandbox_strategy=strategy,
        )
        for name, kind, location, strategy in rows
    )
    with store.unit_of_work(write=True) as uow:
        for resource in resources:
            uow.resources.add(resource)
        uow.commit()
    return DemoEnvironment(
        directory, namespace, repository, database, docs, outbox, action_file, resources
    )
