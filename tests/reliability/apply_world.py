"""The Apply crash loop's demo, with every sandbox strategy: the demo project (git worktree,
SQLite, filesystem copy, ``none``) plus two overlay folders and, when a PostgreSQL database
is given, a PostgreSQL table.

- ``site`` (overlay, the demo plan's): a page edited, a file written in a new folder, one
  deleted and one moved;
- ``wiki`` (overlay, the child plan's, landed by its parent's Apply): a page written;
- ``pg-db`` (``transaction_rollback`` on PostgreSQL, the demo plan's): a row inserted, one
  updated, one deleted. Explicit keys and no defaults such as ``now()``: the expected rows
  are the same in every run.

:func:`extend` registers them and rewrites the demo's action file to use them;
:func:`tree` and :func:`pg_rows` read what the real targets hold, for the loop's comparison
with an Apply nobody interrupted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.demo.demo import DemoEnvironment
from cleveragents_tui.store.store import Store

POSTGRES_URL_FILE = "postgres.url"  # in the work folder: the PostgreSQL target, when there is one
SITE = {
    "index.html": "<h1>hello-cli</h1>\n",
    "obsolete.txt": "an old page\n",
    "notes/draft.md": "# draft\n",
}
PG_ROWS = ((1, "1.0.0", "first release"), (2, "0.9.0", "beta"))


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def _decision(key: str, kind: str, parent: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "key": key,
        "type": kind,
        "parent": parent,
        "question": f"What does {key} change?",
        "alternatives": [{"option": f"The {key} changes", "confidence": 0.9, "tool_calls": calls}],
    }


def extend(store: Store, demo: DemoEnvironment, postgres_url: str | None) -> None:
    """Add the overlay folders (and the PostgreSQL table) to ``demo`` and its action file."""
    ns = demo.namespace
    site, wiki = demo.directory / "site", demo.directory / "wiki"
    for path, content in SITE.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(content, encoding="utf-8")
    wiki.mkdir()
    (wiki / "Home.md").write_text("# Home\n", encoding="utf-8")
    resources = [
        Resource(
            resource_id=f"{ns}/site",
            kind="filesystem",
            location=str(site),
            sandbox_strategy="overlay",
        ),
        Resource(
            resource_id=f"{ns}/wiki",
            kind="filesystem",
            location=str(wiki),
            sandbox_strategy="overlay",
        ),
    ]
    action = yaml.safe_load(demo.action_file.read_text("utf-8"))
    action["resources"].append(f"{ns}/site")
    action["decisions"].append(
        _decision(
            "publish",
            "tool_invocation",
            "strategy",
            [
                _call(
                    "local/edit-file",
                    resource=f"{ns}/site",
                    path="index.html",
                    old="</h1>",
                    new="</h1>\n<p>Now with <code>hello NAME</code>.</p>",
                ),
                _call(
                    "local/write-file",
                    resource=f"{ns}/site",
                    path="releases/1.1.0.md",
                    content="# 1.1.0\n\n`hello NAME`\n",
                ),
                _call("local/delete-file", resource=f"{ns}/site", path="obsolete.txt"),
                _call("local/move", resource=f"{ns}/site", **{"from": "notes", "to": "posts"}),
            ],
        )
    )
    child = action["subactions"][0]
    child["resources"].append(f"{ns}/wiki")
    child["decisions"].append(
        _decision(
            "wiki",
            "implementation_choice",
            "where",
            [
                _call(
                    "local/write-file",
                    resource=f"{ns}/wiki",
                    path="Hello.md",
                    content="# hello\n\nSee the user guide.\n",
                )
            ],
        )
    )
    if postgres_url:
        _create_table(postgres_url)
        resources.append(
            Resource(
                resource_id=f"{ns}/pg-db",
                kind="database",
                location=postgres_url,
                sandbox_strategy="transaction_rollback",
            )
        )
        action["resources"].append(f"{ns}/pg-db")
        statements = [
            {"sql": "INSERT INTO releases (id, version, notes) VALUES (3, '1.1.0', 'hello')"},
            {"sql": "UPDATE releases SET notes = 'first release, greeted' WHERE id = 1"},
            {"sql": "DELETE FROM releases WHERE id = 2"},
        ]
        action["decisions"].append(
            _decision(
                "record-pg",
                "tool_invocation",
                "strategy",
                [_call("local/run-sql", resource=f"{ns}/pg-db", statements=statements)],
            )
        )
    demo.action_file.write_text(yaml.safe_dump(action, sort_keys=False), encoding="utf-8")
    with store.unit_of_work(write=True) as uow:
        for resource in resources:
            uow.resources.add(resource)
        uow.commit()


def _create_table(url: str) -> None:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            connection.execute(
                text("CREATE TABLE releases (id integer PRIMARY KEY, version text, notes text)")
            )
            for row in PG_ROWS:
                connection.execute(
                    text("INSERT INTO releases VALUES (:id, :version, :notes)"),
                    {"id": row[0], "version": row[1], "notes": row[2]},
                )
    finally:
        engine.dispose()


def tree(root: Path) -> dict[str, str]:
    """Every path under ``root``: a file's bytes (hex), ``dir:`` or ``link:<target>``."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        if path.is_symlink():
            found[relative] = f"link:{os.readlink(path)}"
        elif path.is_dir():
            found[relative] = "dir:"
        else:
            found[relative] = path.read_bytes().hex()
    return found


def postgres_url(folder: Path) -> str | None:
    """The PostgreSQL target of the work folder, when it has one."""
    path = folder / POSTGRES_URL_FILE
    return path.read_text("utf-8").strip() if path.exists() else None


def pg_rows(url: str) -> list[list[Any]]:
    """The target's rows, read in a new connection (what anyone else sees committed)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT id, version, notes FROM releases ORDER BY id"))
            return [list(row) for row in rows]
    finally:
        engine.dispose()
