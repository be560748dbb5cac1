"""Bring your own project, from the CLI only: a user's git repository holding a SQLite file,
a docs folder beside it, an action of theirs, a real chat model client, a correction, the
Apply and the cleanup.

Each command is its own process, as at a shell, with HOME, the sandboxes and the OpenAI
client's server in the test's folders: ``agents init`` in the repository, ``resource add``
for the database and the folder, ``action create``, ``plan use --reasoner chat --model
openai:…`` against the scripted OpenAI-compatible server of tests/support (real
``langchain-openai``), ``plan correct --mode=revert --guidance …`` (the server's next
replies make the decision again, differently, and must have been sent the guidance),
``plan apply`` and ``plan discard --yes``.

What the real repository's apply branch, the real database and the real folder hold is
derived from the corrected tree (``plan tree`` and ``plan explain``), and the user's own
checkout — HEAD, index, status, every file's bytes — is compared after every command.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cleveragents_tui.store.store import Store
from tests.support.cli_output import heading_plan_id
from tests.support.openai_server import (
    OpenAIServer,
    Reply,
    Request,
    finish_phase,
    http_error,
    record_decision,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture

pytest.importorskip("langchain_openai")

MODEL = "openai:gpt-4o-mini"
GUIDANCE = "give returning customers 15 percent, not 10"
ACTION_NAME = "local/shop-discount"


def _git(repository: Path, *args: str) -> str:
    """Git as the user runs it; reads take no optional locks, so the index stays as it was."""
    return subprocess.run(
        ["git", "-c", "user.name=me", "-c", "user.email=me@example.invalid", *args],
        cwd=repository,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        timeout=60,
    ).stdout


# -- the model's script ------------------------------------------------------------------


def _write(resource: str, path: str, content: str) -> dict[str, Any]:
    return {
        "tool": "local/write-file",
        "arguments": {"resource": resource, "path": path, "content": content},
    }


def _insert(code: str, percent: int) -> dict[str, Any]:
    return {
        "tool": "local/run-sql",
        "arguments": {
            "resource": "local/shop-db",
            "sql": "INSERT INTO discounts (code, percent) VALUES (:code, :percent)",
            "params": {"code": code, "percent": percent},
        },
    }


APPROACH = record_decision(
    key="approach",
    decision_type="strategy_choice",
    question="Where does the discount live?",
    chosen_option="a discount module, a row in the discounts table, a page in the docs",
    alternatives=["a hard-coded price change"],
    confidence=0.8,
)


def _code(percent: int) -> Reply:
    return record_decision(
        key="code",
        decision_type="implementation_choice",
        question="How does the shop apply the discount?",
        chosen_option=f"a function taking {percent} percent off",
        depends_on=["approach"],
        confidence=0.7,
        tool_calls=[
            _write(
                "local/shop",
                "src/discount.py",
                f"def discounted(price: float) -> float:\n    return price * {100 - percent} / 100\n",
            )
        ],
    )


def _record(percent: int) -> Reply:
    return record_decision(
        key="record",
        decision_type="implementation_choice",
        question="Which discount row does the shop read?",
        chosen_option=f"RETURNING{percent} at {percent} percent",
        depends_on=["code"],
        confidence=0.7,
        tool_calls=[_insert(f"RETURNING{percent}", percent)],
    )


def _doc(percent: int) -> Reply:
    return record_decision(
        key="doc",
        decision_type="implementation_choice",
        question="What do the docs say?",
        chosen_option=f"a page announcing {percent} percent off",
        depends_on=["record"],
        confidence=0.7,
        tool_calls=[
            _write(
                "local/docs",
                "discounts.md",
                f"# Discounts\n\nReturning customers get {percent}% off "
                f"(code RETURNING{percent}).\n",
            )
        ],
    )


def _guided(reply: Reply) -> Any:
    """The reply, but only to a request that carries the user's guidance: without it the
    model cannot know the new figure, and the server answers an error the run reports."""

    def answer(request: Request) -> Reply:
        if GUIDANCE not in request.text:
            return http_error(400, "the replay's request did not carry the user's guidance")
        return reply

    return answer


# -- the user's project and the CLI --------------------------------------------------------


class Project:
    """The user's repository (with a gitignored SQLite file), their docs folder, and
    ``agents`` in a new process per command, with its own HOME and sandbox folder."""

    def __init__(self, tmp_path: Path, server: OpenAIServer) -> None:
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.sandboxes = tmp_path / "sandboxes"
        self.repo = tmp_path / "shop"
        self.db = self.repo / "shop.db"
        self.docs = tmp_path / "team-docs"
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if not k.startswith(("AGENTS_", "OPENAI_", "XDG_"))
            },
            **server.env(),
            "HOME": str(self.home),
            "AGENTS_SANDBOX_DIR": str(self.sandboxes),
        }
        (self.repo / "src").mkdir(parents=True)
        (self.repo / "README.md").write_text("# shop\n")
        (self.repo / "src" / "app.py").write_text("print('shop')\n")
        (self.repo / ".gitignore").write_text("shop.db\n")
        _git(self.repo, "init", "-q", "-b", "main")
        _git(self.repo, "add", "-A")
        _git(self.repo, "commit", "-q", "-m", "shop 1.0")
        # Work of the user's own, in progress: none of it may move.
        (self.repo / "README.md").write_text("# shop\n\nwork in progress\n")
        (self.repo / "staged.txt").write_text("staged\n")
        _git(self.repo, "add", "staged.txt")
        (self.repo / "notes.txt").write_text("untracked\n")
        with sqlite3.connect(self.db) as connection:
            connection.execute(
                "CREATE TABLE discounts (id INTEGER PRIMARY KEY, code TEXT, percent INTEGER)"
            )
            connection.execute("INSERT INTO discounts (code, percent) VALUES ('WELCOME', 5)")
        connection.close()
        self.docs.mkdir()
        (self.docs / "index.md").write_text("# Team docs\n")

    def __call__(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cleveragents_tui", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=cwd or self.repo,
            check=False,
            timeout=300,
        )

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self(*args)
        assert done.returncode == 0, f"agents {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done

    def json(self, *args: str) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.ok("--format=json", *args).stdout)
        return document

    def checkout(self) -> dict[str, object]:
        """The user's checkout: HEAD, the index (its bytes too), the status without the
        database (Apply writes it, and it is ignored) and every working-tree file's bytes."""
        files = {
            str(p.relative_to(self.repo)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(self.repo.rglob("*"))
            if p.is_file() and p != self.db and ".git" not in p.relative_to(self.repo).parts
        }
        status = [
            line
            for line in _git(self.repo, "status", "--porcelain", "--ignored").splitlines()
            if line != "!! shop.db"
        ]
        return {
            "head": (_git(self.repo, "rev-parse", "HEAD"), (self.repo / ".git/HEAD").read_text()),
            "index": (self.repo / ".git" / "index").read_bytes(),
            "stage": _git(self.repo, "ls-files", "--stage"),
            "status": status,
            "files": files,
        }

    def rows(self) -> list[tuple[str, int]]:
        with sqlite3.connect(self.db) as connection:
            found = connection.execute("SELECT code, percent FROM discounts ORDER BY id").fetchall()
        connection.close()
        return [(str(code), int(percent)) for code, percent in found]


@pytest.fixture
def project(tmp_path: Path, openai_server: OpenAIServer) -> Project:
    return Project(tmp_path, openai_server)


def _tree(project: Project, plan_id: str) -> list[dict[str, Any]]:
    """The plan's current decisions, from ``plan tree``, in the order they were made."""
    tree = project.json("plan", "tree", plan_id)
    return sorted(
        (d for d in tree["decisions"] if d["superseded_by"] is None),
        key=lambda d: d["sequence_number"],
    )


def _current(project: Project, plan_id: str) -> dict[str, dict[str, Any]]:
    """The plan's current decisions by question, in the order they were made: ``plan tree``
    names them, ``plan explain`` gives each one's question and tool calls."""
    found = {}
    for row in _tree(project, plan_id):
        explained = project.json("plan", "explain", row["decision_id"])
        found[explained["decision"]["question"]] = {
            **row,
            "tool_invocations": explained["tool_invocations"],
        }
    return found


def test_a_users_own_repository_database_and_folder_from_init_to_discard(
    project: Project, openai_server: OpenAIServer, tmp_path: Path
) -> None:
    untouched = project.checkout()
    rows_before = project.rows()

    # 1. init in the repository, then the database (in it, ignored) and the folder beside it.
    initialised = project.ok("init")
    assert initialised.stdout.splitlines()[0] == f"resource local/shop added: git at {project.repo}"
    added_db = project.ok(
        "resource", "add", "shop-db", "--kind", "database", "--location", "shop.db"
    )
    assert added_db.stdout.startswith(f"resource local/shop-db added: database at {project.db}")
    project.ok("resource", "add", "docs", "--kind", "filesystem", "--location", str(project.docs))
    listed = project.json("resource", "list")["resources"]
    assert [(r["resource_id"], r["sandbox_strategy"]) for r in listed] == [
        ("local/docs", "filesystem_copy"),
        ("local/shop", "git_worktree"),
        ("local/shop-db", "transaction_rollback"),
    ]
    assert project.checkout() == untouched

    # 2. The user's own action, using the three resources.
    action_file = tmp_path / "discount.action.yaml"
    action_file.write_text(
        yaml.safe_dump(
            {
                "name": ACTION_NAME,
                "description": "A discount for returning customers",
                "prompt": "Give returning customers a discount: code, database row and docs.",
                "resources": ["local/shop", "local/shop-db", "local/docs"],
                "tools": ["local/read-file", "local/write-file", "local/run-sql"],
            },
            sort_keys=False,
        )
    )
    created = project.ok("action", "create", str(action_file))
    assert created.stdout.splitlines()[-1] == f"run it: agents plan use {ACTION_NAME}"

    # 3. The plan, decided by the chat model through the real OpenAI client.
    openai_server.add(APPROACH, finish_phase(), _code(10), _record(10), _doc(10), finish_phase())
    used = project.ok(
        "plan", "use", ACTION_NAME, "--reasoner", "chat", "--model", MODEL,
        "--automation-profile", "auto",
    )  # fmt: skip
    plan_id = heading_plan_id(used.stdout)
    assert openai_server.pending == 0
    assert {r.body["model"] for r in openai_server.completions} == {"gpt-4o-mini"}
    chosen = {d["chosen_option"]: d for d in _tree(project, plan_id)}
    assert "RETURNING10 at 10 percent" in chosen
    assert project.rows() == rows_before  # nothing real changes before Apply
    assert sorted(p.name for p in project.docs.iterdir()) == ["index.md"]
    assert project.checkout() == untouched

    # 4. The correction: the row's decision again, with guidance; the model's next replies
    # make it (and what wrote after it) again, differently — only if sent the guidance.
    asked = len(openai_server.completions)
    openai_server.add(_guided(_record(15)), _guided(_doc(15)), finish_phase())
    record_id = chosen["RETURNING10 at 10 percent"]["decision_id"]
    corrected = project(
        "plan", "correct", record_id, "--mode=revert", "--guidance", GUIDANCE, "--yes"
    )
    assert corrected.returncode == 0, corrected.stdout + corrected.stderr
    assert openai_server.pending == 0
    replayed = openai_server.completions[asked:]
    assert len(replayed) == 3  # the row's decision, the page written after it, the phase end
    assert all(GUIDANCE in r.text for r in replayed)
    assert "CORRECTION FROM THE USER" in replayed[0].text
    assert project.checkout() == untouched

    decisions = _current(project, plan_id)
    record = decisions["Which discount row does the shop read?"]
    assert record["chosen_option"] == "RETURNING15 at 15 percent"
    assert record["is_correction"] is True
    assert decisions["How does the shop apply the discount?"]["chosen_option"] == (
        "a function taking 10 percent off"
    )  # before the corrected decision, on a resource it did not write: kept

    # What the corrected tree says lands: its current decisions' tool calls.
    calls = [c for d in decisions.values() for c in d["tool_invocations"]]
    files = {
        (c["arguments"]["resource"], c["arguments"]["path"]): c["arguments"]["content"]
        for c in calls
        if c["tool"] == "local/write-file"
    }
    inserted = [
        (c["arguments"]["params"]["code"], c["arguments"]["params"]["percent"])
        for c in calls
        if c["tool"] == "local/run-sql"
    ]
    assert inserted == [("RETURNING15", 15)]  # the corrected row only, once
    assert set(files) == {("local/shop", "src/discount.py"), ("local/docs", "discounts.md")}
    assert "15%" in files["local/docs", "discounts.md"]

    # 5. Apply: a branch in the repository, the row in the database, the page in the folder.
    project.ok("plan", "apply", plan_id)
    branch = f"cleveragents/apply/{plan_id}"
    assert (
        _git(project.repo, "show", f"{branch}:src/discount.py")
        == files["local/shop", "src/discount.py"]
    )
    changed = _git(project.repo, "diff", "--name-only", "HEAD", branch).split()
    assert changed == ["src/discount.py"]  # only what the plan wrote, not the user's work
    assert project.rows() == rows_before + inserted
    assert (project.docs / "discounts.md").read_text() == files["local/docs", "discounts.md"]
    assert sorted(p.name for p in project.docs.iterdir()) == ["discounts.md", "index.md"]
    assert project.checkout() == untouched

    # 6. Discard: the sandboxes and the apply branch go; the tree stays readable.
    assert (project.sandboxes / plan_id).is_dir()
    discarded = project.ok("plan", "discard", plan_id, "--yes")
    listed = discarded.stdout.splitlines()
    assert f"  branch {branch} in {project.repo} (NOT merged: its commit is lost)" in listed
    assert {
        f"  sandbox of {r} (plan {plan_id})" for r in ("local/shop", "local/shop-db", "local/docs")
    } <= {line.rsplit(":", 1)[0] for line in listed}
    assert listed[-1].startswith(f"discarded plan {plan_id}:")
    assert not (project.sandboxes / plan_id).exists()
    assert _git(project.repo, "branch", "--list", "cleveragents/*") == ""
    assert "cleveragents" not in _git(project.repo, "for-each-ref", "--format=%(refname)")
    assert _git(project.repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert [d["decision_id"] for d in _tree(project, plan_id)] == [  # still there to read
        d["decision_id"] for d in decisions.values()
    ]
    assert project.rows() == rows_before + inserted  # what Apply landed stays
    assert (project.docs / "discounts.md").read_text() == files["local/docs", "discounts.md"]
    assert project.checkout() == untouched


def _stored(project: Project) -> dict[str, list[str]]:
    """What the app's database holds: resources (removed ones too), actions and plans."""
    store = Store.open(str(project.home / ".local" / "share" / "cleveragents" / "agents.db"))
    try:
        with store.unit_of_work() as uow:
            return {
                "resources": sorted(f"{r.resource_id} {r.location}" for r in uow.resources.all()),
                "actions": sorted(a.name for a in uow.actions.all()),
                "plans": sorted(p.plan_id for p in uow.plans.all()),
            }
    finally:
        store.close()


HEAD = "name: local/bad\nprompt: Do it.\nresources: [local/shop]\ntools: [local/read-file]\n"
BAD_ACTIONS = {  # what is not registered: the file, and the start of its one line
    "a tool a decision calls": (
        HEAD
        + "decisions:\n  - key: how\n    type: strategy_choice\n    question: How?\n"
        + "    alternatives:\n      - option: Read it\n        tool_calls:\n"
        + "          - tool: local/teleport\n            arguments: {resource: local/shop}\n",
        ":12: decisions.0.alternatives.0.tool_calls.0.tool: tool local/teleport is not registered",
    ),
    "a resource a subaction names": (
        HEAD + "subactions:\n  - name: local/child\n    prompt: Child.\n"
        "    resources: [local/ghost]\n",
        ":8: subactions.0.resources.0: resource local/ghost is not registered",
    ),
    "a tool a subaction names": (
        HEAD + "subactions:\n  - name: local/child\n    prompt: Child.\n"
        "    resources: [local/shop]\n    tools: [local/frobnicate]\n",
        ":9: subactions.0.tools.0: tool local/frobnicate is not registered",
    ),
}


def test_bad_input_is_refused_in_one_line_storing_nothing(project: Project) -> None:
    """The refusals tests/cli/test_bring_your_own.py does not make, each through the CLI:
    exit 2, one line naming the problem and the fix, nothing stored."""
    project.ok("init")
    project.ok("resource", "add", "docs", "--kind", "filesystem", "--location", str(project.docs))
    sqlite3.connect(project.docs / "kept.db").close()  # a database file in the docs folder
    project.sandboxes.mkdir()
    (project.sandboxes / "old").mkdir()
    stored = _stored(project)
    checkout = project.checkout()
    nowhere = project.home / "nowhere"

    def refused(*args: str) -> str:
        done = project(*args)
        assert done.returncode == 2, f"agents {' '.join(args)}: {done.stdout}{done.stderr}"
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert _stored(project) == stored
        return lines[0]

    def add(name: str, kind: str, location: str) -> str:
        return refused("resource", "add", name, "--kind", kind, "--location", location)

    # Locations that do not exist, for every kind that takes a path (and a SQLite URL).
    for kind in ("git", "database", "external"):
        assert add("x", kind, str(nowhere)) == (
            f"error: location {nowhere} does not exist: give an existing path"
        )
    assert add("x", "database", f"sqlite:///{nowhere}.db") == (
        f"error: location {nowhere}.db does not exist: give an existing path"
    )
    # Inside the app's sandboxes (AGENTS_SANDBOX_DIR, away from its data folder).
    assert add("x", "filesystem", str(project.sandboxes / "old")).startswith(
        f"error: location {project.sandboxes / 'old'} is inside the app's own data "
        f"({project.sandboxes})"
    )
    # A database file inside a folder resource: two sandboxes of the same bytes.
    assert add("x", "database", str(project.docs / "kept.db")).startswith(
        f"error: location {project.docs / 'kept.db'} is inside resource local/docs"
    )
    # A name taken, given with its namespace; a database URL no driver here speaks.
    assert add("local/docs", "filesystem", str(project.repo / "src")).startswith(
        "error: resource local/docs already exists"
    )
    assert "mysql://me@db/shop" in add("x", "database", "mysql://me@db/shop")

    # Actions naming what is not registered, in a decision's tool call or a subaction.
    for what, (text, problem) in BAD_ACTIONS.items():
        action_file = project.home / f"{what.replace(' ', '-')}.yaml"
        action_file.write_text(text)
        assert problem in refused("action", "create", str(action_file)), what
        # Run as a file, unregistered: refused too, before any plan exists — not halfway,
        # when the child plan's spawn would find what is missing.
        assert problem.split(": ")[-1] in refused("plan", "use", str(action_file)), what
    assert project.checkout() == checkout
