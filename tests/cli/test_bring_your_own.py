"""`agents init`, `agents resource …` and `agents action …` on a user's own repository, as a
user drives them: a real git repository with a commit, a real SQLite file, HOME in a
temporary folder. The user's checkout — index and working tree — is never touched."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.store.store import Store
from tests.support.cli_output import heading_plan_id

Run = Callable[..., Result]


def _git(repository: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=me", "-c", "user.email=me@example.invalid", *args],
        cwd=repository,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        timeout=60,
    ).stdout


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME in the test's folder: the app's data folder is ~/.local/share/cleveragents."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("AGENTS_SANDBOX_DIR", raising=False)
    monkeypatch.delenv("AGENTS_DATABASE_URL", raising=False)
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


@pytest.fixture
def repo(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's project: a git repository with one commit, an uncommitted edit, a staged
    file, an untracked one, and a SQLite file; the current folder is inside it."""
    repository = tmp_path / "shop"
    (repository / "src").mkdir(parents=True)
    (repository / "README.md").write_text("# shop\n")
    (repository / "src" / "app.py").write_text("print('shop')\n")
    _git(repository, "init", "-q", "-b", "main")
    _git(repository, "add", "-A")
    _git(repository, "commit", "-q", "-m", "shop 1.0")
    (repository / "README.md").write_text("# shop\n\nwork in progress\n")  # not committed
    (repository / "staged.txt").write_text("staged\n")
    _git(repository, "add", "staged.txt")
    (repository / "notes.txt").write_text("untracked\n")
    with sqlite3.connect(repository / "shop.db") as connection:
        connection.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)")
    connection.close()
    monkeypatch.chdir(repository / "src")
    return repository


@pytest.fixture
def run(tmp_path: Path, home: Path) -> Run:
    """``agents ARGS`` in-process, on the default database in HOME's data folder."""

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)

    return invoke


def checkout(repository: Path) -> dict[str, object]:
    """Everything of the user's checkout: the index's bytes and time, HEAD, the branches and
    every working-tree file with its content."""
    git_dir = repository / ".git"
    index = git_dir / "index"
    files = {
        str(p.relative_to(repository)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(repository.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repository).parts
    }
    return {
        "index": (index.read_bytes(), index.stat().st_mtime_ns),
        "head": (git_dir / "HEAD").read_text(),
        "refs": _git(repository, "for-each-ref", "--format=%(refname) %(objectname)"),
        "files": files,
    }


def data_folder(home: Path) -> Path:
    return home / ".local" / "share" / "cleveragents"


def stored_resources(home: Path) -> list[str]:
    store = Store.open(str(data_folder(home) / "agents.db"))
    try:
        with store.unit_of_work() as uow:
            return sorted(r.resource_id for r in uow.resources.registered())
    finally:
        store.close()


def test_init_registers_the_repository_and_writes_a_starter_action(
    run: Run, repo: Path, home: Path
) -> None:
    before = checkout(repo)
    result = run("init")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    starter = data_folder(home) / "actions" / "shop.action.yaml"
    assert lines[0] == f"resource local/shop added: git at {repo}"
    assert lines[-3:] == [
        f"  agents action create {starter}",
        "  agents plan use local/shop-change",
        '  agents plan use local/shop-change --model openai:gpt-4o-mini --prompt "TASK"',
    ]
    text = starter.read_text()
    assert "# The tools the actors may use" in text and "resources: [local/shop]" in text
    shown = json.loads(run("resource", "show", "shop", "--format=json").output)
    assert (shown["kind"], shown["sandbox_strategy"], shown["location"]) == (
        "git",
        "git_worktree",
        str(repo),
    )
    assert checkout(repo) == before
    # The starter is valid as written: it checks, registers and runs.
    assert run("action", "validate", str(starter)).exit_code == 0


def _committed(folder: Path) -> Path:
    folder.mkdir()
    (folder / "README.md").write_text("# readme\n")
    _git(folder, "init", "-q", "-b", "main")
    _git(folder, "add", "-A")
    _git(folder, "commit", "-q", "-m", "first")
    return folder


def test_init_names_a_folder_with_accents_readably_and_a_name_taken_needs_name(
    run: Run, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: "Été ééé" became local/Ete (accented letters cut out) and "ééé" became
    local/project, as a folder in another script does; a second such folder was then
    refused over its action file, with a fix (--action-file) that only led to the name."""
    monkeypatch.chdir(_committed(tmp_path / "Été ééé"))
    accented = run("init")
    assert accented.exit_code == 0, accented.output
    assert accented.output.splitlines()[-2] == "  agents plan use local/Ete-eee-change"
    starter = data_folder(home) / "actions" / "Ete-eee.action.yaml"
    assert run("action", "validate", str(starter)).exit_code == 0

    monkeypatch.chdir(_committed(tmp_path / "日本"))  # nothing to keep in ASCII
    assert run("init").exit_code == 0
    assert stored_resources(home) == ["local/Ete-eee", "local/project"]
    other = _committed(tmp_path / "中文")
    monkeypatch.chdir(other)
    actions = sorted(p.name for p in (data_folder(home) / "actions").iterdir())

    taken = run("init")

    assert taken.exit_code == 2
    assert taken.stderr.strip() == (
        f"error: the name local/project made from the folder name '中文' is taken by "
        f"{tmp_path / '日本'}: name this repository: agents init --name NAME"
    )
    assert stored_resources(home) == ["local/Ete-eee", "local/project"]
    assert sorted(p.name for p in (data_folder(home) / "actions").iterdir()) == actions
    assert run("init", "--name", "zhongwen").exit_code == 0


def test_init_refuses_outside_a_git_repository_and_a_second_time(
    run: Run, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)
    outside = run("init")
    assert outside.exit_code == 2
    assert outside.stderr.strip().splitlines() == [
        f"error: {plain} is not in a git repository: run `agents init` in your project's "
        "repository (or `git init` and commit first); for a folder without git: agents init "
        "--folder"
    ]
    assert not (data_folder(home) / "actions").exists()
    monkeypatch.chdir(repo)
    assert run("init").exit_code == 0
    before = checkout(repo)
    again = run("init")
    assert again.exit_code == 2
    assert "is already initialised as resource local/shop" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1
    assert stored_resources(home) == ["local/shop"]
    assert checkout(repo) == before


def test_init_folder_registers_a_project_without_git_and_a_plan_lands_in_it(
    run: Run, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    """A project without git: `init --folder` registers the folder as a filesystem
    resource, and the starter action runs on a copy of it; Apply writes the new file into
    the folder, and nothing else of it changes. Inside a repository it is refused."""
    plain = tmp_path / "notes"
    (plain / "src").mkdir(parents=True)
    (plain / "src" / "app.py").write_text("print('notes')\n")
    monkeypatch.chdir(plain)
    initialised = run("init", "--folder")
    assert initialised.exit_code == 0, initialised.output
    assert (
        initialised.output.splitlines()[0] == f"resource local/notes added: filesystem at {plain}"
    )
    shown = json.loads(run("resource", "show", "notes", "--format=json").output)
    assert (shown["kind"], shown["sandbox_strategy"]) == ("filesystem", "filesystem_copy")
    starter = data_folder(home) / "actions" / "notes.action.yaml"
    assert run("action", "create", str(starter)).exit_code == 0
    used = run("plan", "use", "local/notes-change")
    assert used.exit_code == 0, used.output
    plan_id = heading_plan_id(used.stdout)
    assert sorted(p.name for p in plain.rglob("*")) == ["app.py", "src"]  # not before Apply
    applied = run("plan", "apply", plan_id)
    assert applied.exit_code == 0, applied.output
    # what the starter's decision writes, as its action file says
    assert (plain / "CONTRIBUTING.md").read_text() == (
        "# Contributing\n\nRun the tests before you send a change.\n"
    )
    assert (plain / "src" / "app.py").read_text() == "print('notes')\n"
    assert applied.stdout.splitlines()[-1] == (
        f"  kept for corrections: its sandboxes; agents plan discard {plan_id} removes them"
    )  # no git worktree nor apply branch to speak of
    assert run("plan", "discard", plan_id, "--yes").exit_code == 0
    discarded = run("plan", "show", plan_id).output.split("\napplied\n")[1].splitlines()
    assert discarded == ["  discarded: its sandboxes were removed"]

    again = run("init", "--folder")
    assert again.exit_code == 2
    assert "is already initialised as resource local/notes" in again.stderr
    monkeypatch.chdir(repo)
    inside = run("init", "--folder")
    assert inside.exit_code == 2
    assert inside.stderr.strip() == (
        f"error: {repo} is in a git repository ({repo}): leave out --folder: a "
        "repository is sandboxed as git worktrees, which copy nothing and keep your index "
        "and working tree as they are"
    )
    assert stored_resources(home) == ["local/notes"]


def test_an_apply_refused_over_a_file_you_made_is_no_problem_for_doctor(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    """You made CONTRIBUTING.md in the folder while the plan waited: Apply refuses it and
    nothing lands. `agents doctor` reported that as an Apply a crash stopped halfway
    (`half-applied … landed none`, exit 1) with a repair that is refused the same way; the
    folder is as you left it, and once your file is out of the way the Apply lands."""
    plain = tmp_path / "notes"
    plain.mkdir()
    (plain / "app.py").write_text("print('notes')\n")
    monkeypatch.chdir(plain)
    assert run("init", "--folder").exit_code == 0
    assert (
        run("action", "create", str(data_folder(home) / "actions" / "notes.action.yaml")).exit_code
        == 0
    )
    used = run("plan", "use", "local/notes-change")
    assert used.exit_code == 0, used.output
    plan_id = heading_plan_id(used.stdout)
    (plain / "CONTRIBUTING.md").write_text("mine\n")

    refused = run("plan", "apply", plan_id)

    assert refused.exit_code == 3, refused.output
    assert "CONTRIBUTING.md" in refused.stderr
    doctor = run("doctor")
    assert doctor.exit_code == 0, doctor.output
    assert "half-applied" not in doctor.output
    assert (plain / "CONTRIBUTING.md").read_text() == "mine\n"
    (plain / "CONTRIBUTING.md").unlink()
    landed = run("plan", "apply", plan_id)
    assert landed.exit_code == 0, landed.output
    assert (plain / "CONTRIBUTING.md").read_text().startswith("# Contributing\n")


def test_a_folder_made_a_repository_takes_the_database_inside_it(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    """A folder project with its SQLite file inside: the database is refused (two sandboxes
    of the same bytes), with a fix — make the folder a repository — that works as written:
    `init` again registers it and keeps the starter action (it was refused over the file),
    the database is added, and a plan on both applies."""
    plain = tmp_path / "notes"
    plain.mkdir()
    (plain / "app.py").write_text("print('notes')\n")
    with sqlite3.connect(plain / "app.db") as connection:
        connection.execute("CREATE TABLE notes (body TEXT)")
    connection.close()
    monkeypatch.chdir(plain)
    assert run("init", "--folder").exit_code == 0
    starter = data_folder(home) / "actions" / "notes.action.yaml"
    edited = starter.read_text().replace("One new file", "One new file, edited")
    starter.write_text(edited)
    add_db = ("resource", "add", "notes-db", "--kind", "database", "--location", "app.db")

    refused = run(*add_db)

    assert refused.exit_code == 2
    assert refused.stderr.strip() == (
        f"error: location {plain / 'app.db'} is inside resource local/notes ({plain}): two "
        "sandboxes of the same files would overwrite each other on Apply: keep it out of "
        f"{plain}, or make that folder a git repository (git init and a commit, then agents "
        "resource remove local/notes and agents init there): a repository's sandbox never "
        "writes its working tree, so what is in it may be a resource of its own"
    )
    (plain / ".gitignore").write_text("app.db\n")
    _git(plain, "init", "-q", "-b", "main")
    _git(plain, "add", "-A")
    _git(plain, "commit", "-q", "-m", "first")
    assert run("resource", "remove", "local/notes").exit_code == 0
    again = run("init")
    assert again.exit_code == 0, again.output
    assert again.output.splitlines()[:2] == [
        f"resource local/notes added: git at {plain}",
        f"starter action kept: {starter} (it was there, for local/notes)",
    ]
    assert starter.read_text() == edited
    assert run(*add_db).exit_code == 0
    assert run("action", "create", str(starter)).exit_code == 0
    used = run("plan", "use", "local/notes-change")
    assert used.exit_code == 0, used.output
    plan_id = heading_plan_id(used.stdout)
    assert run("plan", "apply", plan_id).exit_code == 0
    landed = _git(plain, "show", f"cleveragents/apply/{plan_id}:CONTRIBUTING.md")
    assert landed == "# Contributing\n\nRun the tests before you send a change.\n"


def test_init_refuses_a_repository_without_a_commit(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q")
    monkeypatch.chdir(empty)
    result = run("init")
    assert result.exit_code == 2 and "has no commit yet" in result.stderr
    assert stored_resources(home) == []


def test_resource_add_database_and_folder_then_list_show_remove(
    run: Run, repo: Path, tmp_path: Path, home: Path
) -> None:
    assert run("init").exit_code == 0
    docs = tmp_path / "site" / "docs"
    docs.mkdir(parents=True)
    (tmp_path / "assets").mkdir()
    before = checkout(repo)
    added = run("resource", "add", "shop-db", "--kind", "database", "--location", "../shop.db")
    assert added.exit_code == 0, added.output
    assert added.output.strip() == (
        f"resource local/shop-db added: database at {repo / 'shop.db'}, transaction_rollback, "
        "checkpoints on, at most 50 per plan"
    )
    folder = run(
        "resource", "add", "team/docs", "--kind", "filesystem", "--location", str(docs),
        "--no-checkpoints",
    )  # fmt: skip
    assert folder.exit_code == 0, folder.output
    assert "filesystem_copy, checkpoints off" in folder.output
    around = run(
        "resource", "add", "site", "--kind", "filesystem", "--location", str(tmp_path / "site"),
    )  # fmt: skip
    assert around.exit_code == 2 and "around resource team/docs" in around.stderr
    capped = run(
        "resource", "add", "assets", "--kind", "filesystem", "--location",
        str(tmp_path / "assets"), "--strategy", "overlay", "--max-checkpoints", "7",
    )  # fmt: skip
    assert "overlay, checkpoints on, at most 7 per plan" in capped.output
    listing = json.loads(run("resource", "list", "--format=json").output)["resources"]
    assert [(r["resource_id"], r["sandbox_strategy"]) for r in listing] == [
        ("local/assets", "overlay"),
        ("local/shop", "git_worktree"),
        ("local/shop-db", "transaction_rollback"),
        ("team/docs", "filesystem_copy"),
    ]
    assert checkout(repo) == before
    removed = run("resource", "remove", "team/docs")
    assert removed.exit_code == 0 and removed.output.strip() == "resource team/docs removed"
    assert stored_resources(home) == ["local/assets", "local/shop", "local/shop-db"]
    assert docs.is_dir()


def _refusal(run: Run, home: Path, *args: str) -> str:
    before = stored_resources(home)
    result = run("resource", "add", *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert stored_resources(home) == before
    return lines[0]


def test_resource_add_refuses_bad_input_in_one_line_storing_nothing(
    run: Run, repo: Path, tmp_path: Path, home: Path
) -> None:
    assert run("init").exit_code == 0
    docs = tmp_path / "docs"
    (docs / "api").mkdir(parents=True)
    assert (
        run("resource", "add", "docs", "--kind", "filesystem", "--location", str(docs)).exit_code
        == 0
    )
    data = data_folder(home)
    (data / "mine").mkdir()
    assert _refusal(run, home, "x", "--kind", "svn", "--location", str(docs)) == (
        "error: unknown kind 'svn': use one of: git, filesystem, database, external"
    )
    assert _refusal(run, home, "x", "--kind", "filesystem", "--location", str(tmp_path / "no")) == (
        f"error: location {tmp_path / 'no'} does not exist: give an existing path"
    )
    assert "inside the app's own data" in _refusal(
        run, home, "x", "--kind", "filesystem", "--location", str(data / "mine")
    )
    assert "inside the app's own data" in _refusal(
        run, home, "x", "--kind", "database", "--location", str(data / "agents.db")
    )
    assert "holding the app's own data" in _refusal(
        run, home, "x", "--kind", "filesystem", "--location", str(home)
    )
    assert f"inside resource local/docs ({docs})" in _refusal(
        run, home, "x", "--kind", "filesystem", "--location", str(docs / "api")
    )
    assert _refusal(run, home, "docs", "--kind", "filesystem", "--location", str(tmp_path)) == (
        f"error: resource local/docs already exists (filesystem at {docs}): choose another "
        "name, or remove it first: agents resource remove local/docs"
    )
    assert "cannot connect to the database" in _refusal(
        run, home, "pg", "--kind", "database", "--location", "postgresql://nobody@127.0.0.1:1/shop"
    )
    not_a_database = tmp_path / "notes.db"
    not_a_database.write_text("just text, not SQLite")
    assert _refusal(run, home, "x", "--kind", "database", "--location", str(not_a_database)) == (
        f"error: {not_a_database} is not a SQLite database: give a SQLite file or a "
        "postgresql:// URL"
    )
    assert "does not fit a database resource" in _refusal(
        run, home, "x", "--kind", "database", "--location", str(repo / "shop.db"),
        "--strategy", "git_worktree",
    )  # fmt: skip
    assert f"is inside the git repository {repo}" in _refusal(
        run, home, "x", "--kind", "git", "--location", str(repo / "src")
    )


@pytest.mark.postgres
def test_a_postgresql_url_registers_with_the_database_strategy(
    run: Run, repo: Path, home: Path, postgres_url: str
) -> None:
    added = run("resource", "add", "orders", "--kind", "database", "--location", postgres_url)
    assert added.exit_code == 0, added.output
    shown = json.loads(run("resource", "show", "orders", "--format=json").output)
    assert (shown["sandbox_strategy"], shown["location"]) == ("transaction_rollback", postgres_url)


def test_a_password_in_a_url_is_refused_and_one_stored_before_is_never_shown(
    run: Run, repo: Path, home: Path
) -> None:
    """A password in a resource's URL was stored and printed by `resource add`, `list` and
    `show` — to everyone who reads the database, in a browser too. Refused now, before any
    connection, saying where it goes instead; one an older version stored shows as ***."""
    assert run("init").exit_code == 0
    for kind, url in (
        ("database", "postgresql://bob:s3cret@db.example.invalid/shop"),
        ("external", "https://bot:t0ken@chat.example.invalid/hooks/1"),
    ):
        refused = _refusal(run, home, "x", "--kind", kind, "--location", url)
        assert refused.startswith(f"error: the location {url.split(':')[0]}://"), refused
        assert "holds a password, which agents would store and show" in refused
        assert "~/.pgpass or PGPASSWORD" in refused
        assert "s3cret" not in refused and "t0ken" not in refused
    store = Store.open(str(data_folder(home) / "agents.db"))
    try:
        with store.unit_of_work(write=True) as uow:
            uow.resources.add(
                Resource(
                    resource_id="local/chat",
                    kind="external",
                    location="https://bot:t0ken@chat.example.invalid/hooks/1",
                    sandbox_strategy="none",
                )
            )
            uow.commit()
    finally:
        store.close()
    shown = "https://bot:***@chat.example.invalid/hooks/1"
    listed = run("resource", "list")
    assert shown in listed.output and "t0ken" not in listed.output
    assert f"  location   {shown}\n" in run("resource", "show", "chat").output
    document = json.loads(run("resource", "show", "chat", "--format=json").output)
    assert document["location"] == shown


def test_the_app_database_itself_is_refused_as_a_postgresql_resource(
    run: Run, repo: Path, home: Path, tmp_path: Path
) -> None:
    own = str(tmp_path / "agents.db")
    result = CliRunner().invoke(
        cli, ["--db", own, "resource", "add", "x", "--kind", "database", "--location", own]
    )
    assert result.exit_code == 2 and "inside the app's own data" in result.stderr


ACTION = """\
name: local/shop-readme
prompt: Add a section to the README.
resources: [local/shop]
tools: [local/read-file]
automation_profile: trusted
decisions:
  - key: how
    type: strategy_choice
    question: How?
    alternatives:
      - option: A CONTRIBUTING file
  - key: write
    type: implementation_choice
    parent: how
    question: What does it say?
    alternatives:
      - option: How to run the shop
        tool_calls:
          - tool: local/write-file
            arguments: {resource: local/shop, path: CONTRIBUTING.md, content: "Run it.\\n"}
"""


def test_a_database_in_the_repository_is_said_once_where_it_matters(
    run: Run, repo: Path, home: Path
) -> None:
    """The checkout's own database file, registered as a resource: `plan use` counted it
    among the new files the plan leaves out (it is a resource of its own, with its own
    sandbox). A database file git tracks is named when it is added, with how to keep the
    two apart: its Apply writes rows into a file of the checkout."""
    assert run("init").exit_code == 0
    added = run("resource", "add", "shop-db", "--kind", "database", "--location", "../shop.db")
    assert added.exit_code == 0 and added.stderr == "", added.output  # untracked: nothing said
    assert (
        run("action", "create", str(data_folder(home) / "actions" / "shop.action.yaml")).exit_code
        == 0
    )
    used = run("plan", "use", "local/shop-change")
    assert used.exit_code == 0, used.output
    assert used.stderr.splitlines()[0] == (
        "note: local/shop has 2 changed files and 1 new file not committed: the plan starts "
        "from your last commit, without them (commit them first to include them)"
    )  # notes.txt: shop.db is local/shop-db
    with sqlite3.connect(repo / "ledger.db") as connection:
        connection.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY)")
    connection.close()
    _git(repo, "add", "ledger.db")
    _git(repo, "commit", "-q", "-m", "ledger")

    ledger = run("resource", "add", "ledger", "--kind", "database", "--location", "../ledger.db")

    assert ledger.exit_code == 0, ledger.output
    assert ledger.stderr == (
        "note: ledger.db (local/ledger) is tracked by git in local/shop: what its plans change "
        "lands in that file of your working tree, which git then shows as a change of your "
        f"checkout; to keep them apart, add ledger.db to .gitignore and untrack it: git -C {repo} "
        "rm -r --cached -- ledger.db\n"
    )


def test_init_names_a_registered_database_its_repository_tracks(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: Path
) -> None:
    """The database was registered first; its folder then became a repository that tracks
    it: `init` says so, as `resource add` does the other way round."""
    project = tmp_path / "ledger"
    project.mkdir()
    with sqlite3.connect(project / "ledger.db") as connection:
        connection.execute("CREATE TABLE entries (id INTEGER PRIMARY KEY)")
    connection.close()
    monkeypatch.chdir(project)
    assert (
        run(
            "resource", "add", "ledger-db", "--kind", "database", "--location", "ledger.db"
        ).exit_code
        == 0
    )
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "ledger")

    initialised = run("init")

    assert initialised.exit_code == 0, initialised.output
    assert initialised.stderr.startswith(
        "note: ledger.db (local/ledger-db) is tracked by git in local/ledger: what its plans "
        "change lands in that file of your working tree"
    ), initialised.stderr


def test_action_create_then_plan_use_by_name_runs_it_and_apply_leaves_the_checkout(
    run: Run, repo: Path, tmp_path: Path, home: Path
) -> None:
    assert run("init").exit_code == 0
    action_file = tmp_path / "readme.action.yaml"
    action_file.write_text(ACTION)
    created = run("action", "create", str(action_file))
    assert created.exit_code == 0, created.output
    assert created.output.splitlines() == [
        "action local/shop-readme registered (2 decision points, resources: local/shop)",
        "run it: agents plan use local/shop-readme",
    ]
    assert run("action", "list").output.split()[0] == "local/shop-readme"
    shown = json.loads(run("action", "show", "local/shop-readme", "--format=json").output)
    assert shown["source"] == str(action_file) and shown["definition"]["resources"] == [
        "local/shop"
    ]
    action_file.unlink()  # the stored definition runs, not the file
    before = checkout(repo)
    used = run("plan", "use", "local/shop-readme")
    assert used.exit_code == 0, used.output
    # the edit, the staged file, the untracked notes and database are left out, and said so
    assert used.stderr.splitlines()[0] == (
        "note: local/shop has 2 changed files and 2 new files not committed: the plan starts "
        "from your last commit, without them (commit them first to include them)"
    )
    plan_id = heading_plan_id(used.stdout)
    assert "execute · awaiting_approval" in used.stdout.splitlines()[0]
    busy = run("resource", "remove", "shop")
    assert busy.exit_code == 2
    assert busy.stderr.strip() == (
        f"error: resource local/shop is used by plan {plan_id} (awaiting_approval), which is not "
        f"finished: apply or cancel it first: agents plan cancel {plan_id}"
    )
    applied = run("plan", "apply", plan_id)
    assert applied.exit_code == 0, applied.output
    assert _git(repo, "show", f"cleveragents/apply/{plan_id}:CONTRIBUTING.md") == "Run it.\n"
    assert _git(repo, "show", f"cleveragents/apply/{plan_id}:README.md") == "# shop\n"  # as said
    after = checkout(repo)
    assert {k: v for k, v in after.items() if k != "refs"} == {
        k: v for k, v in before.items() if k != "refs"
    }
    assert f"refs/heads/cleveragents/apply/{plan_id}" in str(after["refs"])
    gone = run("resource", "remove", "shop")
    assert gone.exit_code == 0
    assert gone.output.strip() == (
        "resource local/shop removed (kept in the history of the plans that used it)"
    )
    assert run("plan", "tree", plan_id).exit_code == 0
    assert stored_resources(home) == []
    again = run("resource", "add", "shop", "--kind", "git", "--location", str(repo))
    assert again.exit_code == 2 and "belonged to a removed resource" in again.stderr


def test_action_create_refuses_unknown_resources_and_tools_storing_nothing(
    run: Run, repo: Path, tmp_path: Path, home: Path
) -> None:
    assert run("init").exit_code == 0
    action_file = tmp_path / "a.yaml"
    action_file.write_text(ACTION.replace("resources: [local/shop]", "resources: [local/nope]"))
    unknown_resource = run("action", "create", str(action_file))
    assert unknown_resource.exit_code == 2
    assert unknown_resource.stderr.strip().splitlines() == [
        f"error: {action_file}:3: resources.0: resource local/nope is not registered: register "
        "it with `agents resource add` (list them with `agents resource list`): 1 more: see "
        f"them all with `agents action validate {action_file}`"
    ]
    action_file.write_text(ACTION.replace("tools: [local/read-file]", "tools: [local/teleport]"))
    unknown_tool = run("action", "create", str(action_file))
    assert unknown_tool.exit_code == 2
    assert len(unknown_tool.stderr.strip().splitlines()) == 1
    assert f"{action_file}:4: tools.0: tool local/teleport is not registered" in unknown_tool.stderr
    assert run("action", "list").output.startswith("No actions registered.")


BROKEN = """\
name: local/broken
prompt: Fix it.
prompt: Twice.
resources: [local/shop, local/ghost]
tools: [local/read-file, local/frobnicate]
limits: {max_tool_invocations: -1}
decisions:
  - key: a
    type: strategy_choice
    question: q
    alternatives:
      - option: o
        confidence: 2
  - key: b
    type: implementation_choice
    question: q
    parent: zz
    alternatives:
      - option: o
        tool_calls:
          - tool: local/write-file
            arguments: {resource: local/elsewhere, path: x, content: y}
  - key: b
    type: implementation_choice
    question: q
    alternatives: []
"""


def test_action_validate_reports_every_problem_with_its_line(
    run: Run, repo: Path, tmp_path: Path
) -> None:
    assert run("init").exit_code == 0
    broken = tmp_path / "broken.yaml"
    broken.write_text(BROKEN)
    result = run("action", "validate", str(broken))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"{broken}:3: prompt: the key is given twice (first on line 2)",
        f"{broken}:4: resources.1: resource local/ghost is not registered: register it with "
        "`agents resource add` (list them with `agents resource list`)",
        f"{broken}:5: tools.1: tool local/frobnicate is not registered: use one of "
        "local/chmod, local/delete, local/delete-file, local/edit-file, local/list-files, "
        "local/mkdir, local/move, local/notify, local/query-sql, local/read-file, "
        "local/run-command, local/run-sql, local/run-tests, local/search-files, local/symlink, "
        "local/write-file",
        f"{broken}:6: limits.max_tool_invocations: Input should be greater than or equal to 0",
        f"{broken}:13: decisions.0.alternatives.0.confidence: Input should be less than or "
        "equal to 1",
        f"{broken}:17: decisions.1.parent: decision b refers to 'zz', which is not an earlier "
        "decision",
        f"{broken}:22: decisions.1.alternatives.0.tool_calls.0.arguments.resource: resource "
        "local/elsewhere is not one of the action's resources: add it to `resources`",
        f"{broken}:23: decisions.2.key: decision key 'b' is used twice",
        f"{broken}:26: decisions.2.alternatives: Tuple should have at least 1 item after "
        "validation, not 0",
        f"error: 9 problems in {broken}: fix the action file (docs/actions.md)",
    ]
    doc = json.loads(run("action", "validate", str(broken), "--format=json").stdout)
    assert [p["line"] for p in doc["problems"]] == [3, 4, 5, 6, 13, 17, 22, 23, 26]
    syntax = tmp_path / "syntax.yaml"
    syntax.write_text("name: local/x\nprompt: [unclosed\n")
    bad_yaml = run("action", "validate", str(syntax))
    assert bad_yaml.exit_code == 2
    assert bad_yaml.stderr.startswith(f"{syntax}:3: not valid YAML")


def test_checkpoint_settings_globally_and_per_resource(
    run: Run, repo: Path, tmp_path: Path, home: Path
) -> None:
    set_global = run("config", "set", "sandbox.checkpoint.max-per-plan", "12")
    assert set_global.output.strip() == "sandbox.checkpoint.max-per-plan = 12 (global)"
    assert run("config", "set", "sandbox.checkpoint.enabled", "off").exit_code == 0
    assert run("init").exit_code == 0  # takes the global defaults
    shown = json.loads(run("resource", "show", "shop", "--format=json").output)
    assert (shown["checkpoint_enabled"], shown["checkpoint_max_per_plan"]) == (False, 12)
    changed = run("config", "set", "sandbox.checkpoint.enabled", "true", "--resource", "shop")
    assert changed.output.strip() == "sandbox.checkpoint.enabled = true (resource:local/shop)"
    got = run("config", "get", "sandbox.checkpoint.enabled", "--resource", "shop")
    assert got.output.strip() == "true"
    reset = run("config", "unset", "sandbox.checkpoint.enabled", "--resource", "shop")
    assert reset.output.strip() == (
        "sandbox.checkpoint.enabled = false (resource:local/shop, the default)"
    )
    project = run("config", "set", "sandbox.checkpoint.enabled", "true", "--project", "local/x")
    assert project.exit_code == 2
    assert "is set globally or per resource, not per project" in project.stderr
    not_resource = run("config", "set", "core.automation-profile", "auto", "--resource", "shop")
    assert not_resource.exit_code == 2 and "is not a resource setting" in not_resource.stderr
    too_small = run("config", "set", "sandbox.checkpoint.max-per-plan", "1", "--resource", "shop")
    assert too_small.exit_code == 2 and "from 2 to 10000" in too_small.stderr


def test_turning_checkpoints_off_is_refused_while_a_plan_uses_the_resource(
    run: Run, repo: Path, tmp_path: Path, home: Path
) -> None:
    assert run("init").exit_code == 0
    action_file = tmp_path / "a.yaml"
    action_file.write_text(ACTION)
    used = run("plan", "use", str(action_file))
    assert used.exit_code == 0, used.output
    plan_id = heading_plan_id(used.stdout)
    refused = run("config", "set", "sandbox.checkpoint.enabled", "false", "--resource", "shop")
    assert refused.exit_code == 2
    assert refused.stderr.strip() == (
        f"error: resource local/shop is used by plan {plan_id} (awaiting_approval), which is "
        "not finished: its decisions would be checkpointed only in part: cancel it first "
        f"(agents plan cancel {plan_id}), then run the action again"
    )
    shown = json.loads(run("resource", "show", "shop", "--format=json").output)
    assert shown["checkpoint_enabled"] is True
    assert shown["plans"] == [{"plan_id": plan_id, "state": "awaiting_approval"}]
    budget = run("config", "set", "sandbox.checkpoint.max-per-plan", "80", "--resource", "shop")
    assert budget.exit_code == 0  # a budget may change at any time
    assert run("plan", "cancel", plan_id).exit_code == 0
    assert (
        run("config", "set", "sandbox.checkpoint.enabled", "false", "--resource", "shop").exit_code
        == 0
    )


def test_remove_is_refused_while_a_child_plan_to_come_names_the_resource(
    run: Run, repo: Path, tmp_path: Path, home: Path
) -> None:
    assert run("init").exit_code == 0
    docs = tmp_path / "docs"
    docs.mkdir()
    assert (
        run("resource", "add", "docs", "--kind", "filesystem", "--location", str(docs)).exit_code
        == 0
    )
    action_file = tmp_path / "a.yaml"
    action_file.write_text(
        ACTION
        + "subactions:\n  - name: local/write-docs\n    prompt: Document it.\n"
        + "    resources: [local/docs]\n"
    )
    created = run("action", "create", str(action_file), "--automation-profile", "manual")
    assert created.exit_code == 0, created.output
    replaced = run("action", "create", str(action_file))
    assert replaced.exit_code == 2 and "is already registered" in replaced.stderr
    assert "replaced" in run("action", "create", str(action_file), "--replace").output
    used = run("plan", "use", "local/shop-readme", "--automation-profile", "manual")
    assert "strategize · awaiting_approval" in used.output  # waits before Strategize
    plan_id = heading_plan_id(used.stdout)
    refused = run("resource", "remove", "docs")
    assert refused.exit_code == 2 and f"used by plan {plan_id}" in refused.stderr
    assert stored_resources(home) == ["local/docs", "local/shop"]


def test_a_plan_on_a_clean_checkout_notes_nothing(
    run: Run, tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(_committed(tmp_path / "shop"))
    assert run("init").exit_code == 0
    action_file = tmp_path / "readme.action.yaml"
    action_file.write_text(ACTION)
    assert run("action", "create", str(action_file)).exit_code == 0
    used = run("plan", "use", "local/shop-readme")
    assert used.exit_code == 0, used.output
    assert "note:" not in used.stderr
