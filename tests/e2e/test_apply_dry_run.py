"""``agents plan apply PLAN --dry-run`` on the demo's real parts (a git repository, a
directory, a SQLite database, a ``none`` resource): it lists what the real Apply then lands,
checked against the real branch, files and rows afterwards, and it changes nothing."""

from __future__ import annotations

import gc
import getpass
import hashlib
import json
import shlex
import shutil
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cleveragents_tui.cli import cli
from cleveragents_tui.failpoints import ENV_VAR


class Agents:
    """``agents --db <tmp> ...`` in-process, with the test's own sandbox folder."""

    def __init__(self, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.home = home
        self.db = home / "agents.db"
        monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(home / "sandboxes"))
        monkeypatch.delenv(ENV_VAR, raising=False)

    def __call__(self, *args: str) -> Result:
        return CliRunner().invoke(cli, ["--db", str(self.db), *args], catch_exceptions=False)

    def demo(self, profile: str = "auto") -> dict[str, Any]:
        made = self(
            "demo", "--no-tui", "--dir", str(self.home / "demo"), "--format=json",
            "--automation-profile", profile,
        )  # fmt: skip
        assert made.exit_code == 0, made.output
        doc: dict[str, Any] = json.loads(made.stdout)
        return doc

    def preview(self, plan_id: str) -> dict[str, Any]:
        shown = self("plan", "apply", plan_id, "--dry-run", "--format=json")
        assert shown.exit_code == 0, shown.output
        doc: dict[str, Any] = json.loads(shown.stdout)
        return doc


@pytest.fixture
def agents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Agents:
    return Agents(tmp_path, monkeypatch)


def _by_resource(doc: dict[str, Any]) -> dict[str, Any]:
    """resource name -> its listed changes ({path: kind}) or, not listed, its note."""
    out: dict[str, Any] = {}
    for plan in doc["plans"]:
        for resource in plan["resources"]:
            name = resource["resource_id"].split("/")[1]
            changes = resource["changes"]
            out[name] = (
                resource["note"]
                if changes is None
                else {change["path"]: change["kind"] for change in changes}
            )
    return out


def _files(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (relative path -> sha256); symlinks by their target."""
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            out[path.relative_to(folder).as_posix()] = "-> " + str(path.readlink())
        elif path.is_file():
            out[path.relative_to(folder).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _tables(connection: sqlite3.Connection) -> list[str]:
    """The database's own tables (not SQLite's), by name."""
    found = connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name"
    )
    return [name for (name,) in found]


def _rows(database: Path) -> dict[str, dict[str, tuple[Any, ...]]]:
    """Every table's rows by primary key (the demo's tables have one), read only."""
    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)
    try:
        out = {}
        for table in _tables(connection):
            info = connection.execute(f'PRAGMA table_info("{table}")').fetchall()
            [key] = [i for i, row in enumerate(info) if row[5] == 1]
            rows = connection.execute(f'SELECT * FROM "{table}"').fetchall()
            out[table] = {str(row[key]): tuple(row) for row in rows}
        return out
    finally:
        connection.close()


def _compare(before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
    changed = {key: "added" for key in after.keys() - before.keys()}
    changed |= {key: "deleted" for key in before.keys() - after.keys()}
    changed |= {
        key: "modified" for key in before.keys() & after.keys() if before[key] != after[key]
    }
    return changed


def _row_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, str]:
    out = {}
    for table in before.keys() | after.keys():
        for key, kind in _compare(before.get(table, {}), after.get(table, {})).items():
            out[f"{table}/{key}"] = kind
    return out


def _store_rows(database: Path) -> dict[str, list[tuple[Any, ...]]]:
    """A dump of every table of the engine's store."""
    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)
    try:
        return {
            name: sorted(connection.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr)
            for name in _tables(connection)
        }
    finally:
        connection.close()


def test_the_dry_run_lists_exactly_what_apply_then_lands(agents: Agents) -> None:
    demo = agents.demo()
    plan_id = demo["plan_id"]
    directory = Path(demo["directory"])
    repository, docs, database = directory / "hello-cli", directory / "docs", directory / "app.db"
    text = agents("plan", "apply", plan_id, "--dry-run")
    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines()[-1] == f"land it: agents plan apply {plan_id}"
    preview = agents.preview(plan_id)
    assert (preview["at_apply_gate"], preview["note"]) == (True, None)
    assert preview["command"] == f"agents plan apply {plan_id}"
    docs_before, rows_before = _files(docs), _rows(database)
    base = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repository, capture_output=True, text=True, check=True
    ).stdout.strip()

    applied = agents("plan", "apply", plan_id, "--format=json")  # the command's own option
    assert applied.exit_code == 0, applied.output
    assert json.loads(applied.stdout)["format"] == "cleveragents.plan-result/1"

    branch = f"cleveragents/apply/{plan_id}"
    landed = subprocess.run(
        ["git", "diff", "--name-status", "--no-renames", base, branch],
        cwd=repository,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    kinds = {"A": "added", "M": "modified", "D": "deleted"}
    in_branch = {line.split("\t")[1]: kinds[line[0]] for line in landed.splitlines()}
    listed = _by_resource(preview)
    assert in_branch and listed["hello-cli"] == in_branch
    assert listed["docs"] and listed["docs"] == _compare(docs_before, _files(docs))
    assert listed["app-db"] and listed["app-db"] == _row_changes(rows_before, _rows(database))
    assert "went straight to the real resource" in listed["team-chat"]
    # The child plan's resource is listed under the child, before the plan (Apply's order).
    assert [p["plan_id"] for p in preview["plans"]][-1] == plan_id
    assert len(preview["plans"]) == 2


def test_the_dry_run_changes_nothing(agents: Agents, tmp_path: Path) -> None:
    """No approval answered, no event or row, no sandbox file, nothing real: the store's
    rows and every file under the test's folder (store, sandboxes, demo) are as they were."""
    plan_id = agents.demo()["plan_id"]
    # The demo ran in this process: a git sandbox it left for the garbage collector removes
    # its commit draft when collected, which a command's exit does at once.
    gc.collect()
    before = (_store_rows(agents.db), _files(tmp_path))
    assert agents("plan", "apply", plan_id, "--dry-run").exit_code == 0
    agents.preview(plan_id)
    globally = agents("--format=json", "plan", "apply", plan_id, "--dry-run")
    assert json.loads(globally.stdout)["format"] == "cleveragents.apply-preview/1"
    after = (_store_rows(agents.db), _files(tmp_path))
    assert after[0] == before[0]
    assert after[1] == before[1]
    pending = json.loads(agents("approval", "list", "--format=json").stdout)["approvals"]
    assert [a["kind"] for a in pending] == ["apply_gate"]


def test_a_plan_still_in_execute_lists_its_changes_so_far(agents: Agents) -> None:
    """Under the supervised profile, answered gate by gate until the plan is in Execute with
    a question before its Apply gate: `plan apply` would refuse; the dry run says why and
    lists what the sandboxes hold so far (the child plan's docs, finished)."""
    plan_id = agents.demo("supervised")["plan_id"]
    for _ in range(10):
        pending = json.loads(agents("approval", "list", "--format=json").stdout)["approvals"]
        mine = [a for a in pending if a["plan_id"] == plan_id]
        if any(a["kind"] == "escalation" for a in mine):
            break
        assert agents("approval", "approve", pending[0]["approval_id"]).exit_code == 0
        assert agents("plan", "run", plan_id).exit_code == 0  # its run runs the child on
    preview = agents.preview(plan_id)
    assert (preview["phase"], preview["at_apply_gate"]) == ("execute", False)
    assert "waits for an answer before its Apply gate" in preview["note"]
    assert _by_resource(preview)["docs"] == {"guide.md": "modified"}
    [question] = [a for a in pending if a["plan_id"] == plan_id and a["kind"] == "escalation"]
    assert (preview["verdict"], preview["first"]) == (
        "waits",
        f"agents approval approve {question['approval_id']}",
    )
    text = agents("plan", "apply", plan_id, "--dry-run")
    assert text.stdout.splitlines()[-1] == (
        f"first: agents approval approve {question['approval_id']} (until then `plan apply` "
        f"refuses, exit 2); then land it: agents plan apply {plan_id}"
    )
    assert agents("plan", "apply", plan_id).exit_code == 2  # as the note said
    # With --as NAME, both commands keep it: the question is answered as NAME.
    named = agents("plan", "apply", plan_id, "--dry-run", "--as", NAME, "--format=json")
    first = json.loads(named.stdout)["first"]
    assert first == f"agents approval approve {question['approval_id']} --as {shlex.quote(NAME)}"
    assert _run_suggested(agents, first).exit_code == 0
    answered = json.loads(agents("approval", "list", "--all", "--format=json").stdout)
    [asked] = [a for a in answered["approvals"] if a["approval_id"] == question["approval_id"]]
    assert (asked["answer"], asked["answered_by"]) == ("approved", NAME)


def _one_line_refusal(result: Result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr


def test_usage_errors_exit_2_with_one_line(agents: Agents) -> None:
    demo = agents.demo()
    plan_id = demo["plan_id"]
    unknown = agents("plan", "apply", "01" + "0" * 24, "--dry-run")
    _one_line_refusal(unknown, "error:")
    early = agents("plan", "use", demo["action_file"], "--automation-profile", "manual")
    waiting = early.stdout.split("plan ")[-1].split()[0]
    refused = agents("plan", "apply", waiting, "--dry-run")
    _one_line_refusal(refused, "no sandboxes before Execute", f"agents plan run {waiting}")
    assert agents("plan", "apply", plan_id).exit_code == 0
    applied = agents("plan", "apply", plan_id, "--dry-run")
    _one_line_refusal(applied, "applied already", f"agents plan show {plan_id}")
    assert agents("plan", "cancel", waiting).exit_code == 0
    _one_line_refusal(agents("plan", "apply", waiting, "--dry-run"), "is cancelled")


def test_the_document_keeps_its_fields_and_order(agents: Agents) -> None:
    preview = agents.preview(agents.demo()["plan_id"])
    assert list(preview) == [
        "format", "plan_id", "phase", "state", "at_apply_gate", "note", "plans", "command",
        "verdict", "first", "approved_by", "outside_changes",
    ]  # fmt: skip
    assert preview["format"] == "cleveragents.apply-preview/1"
    for plan in preview["plans"]:
        assert list(plan) == ["plan_id", "action", "sandbox_host", "resources"]
        for resource in plan["resources"]:
            assert list(resource) == ["resource_id", "strategy", "changes", "note", "refusal"]


def test_a_name_an_agent_wrote_is_one_escaped_line_and_exact_in_json(agents: Agents) -> None:
    """A file name holding a newline and an escape sequence, written in the docs sandbox:
    the text lists it as one quoted line, as `plan diff` does, and the JSON gives its bytes."""
    plan_id = agents.demo()["plan_id"]
    [guide] = [p for p in (agents.home / "sandboxes").rglob("guide.md") if "work" in p.parts]
    hostile = "fake\n      deleted   guide.md\x1b[2J"
    (guide.parent / hostile).write_text("x")

    shown = agents("plan", "apply", plan_id, "--dry-run")
    assert shown.exit_code == 0, shown.output
    assert '      added     "fake\\n      deleted   guide.md\\x1b[2J"\n' in shown.stdout
    assert "\x1b" not in shown.stdout and "      deleted   guide.md\n" not in shown.stdout
    assert _by_resource(agents.preview(plan_id))["docs"][hostile] == "added"


def _docs_refusal(doc: dict[str, Any]) -> str | None:
    [docs] = [r for p in doc["plans"] for r in p["resources"] if r["resource_id"].endswith("/docs")]
    refusal: str | None = docs["refusal"]
    return refusal


def test_the_dry_run_says_when_apply_would_be_refused(agents: Agents) -> None:
    """Someone edits the real guide.md the plan's child changed: the dry run says Apply
    would refuse it, naming the path, and the real Apply then refuses (exit 3). Put back,
    the dry run is clean and Apply lands."""
    demo = agents.demo()
    plan_id, guide = demo["plan_id"], Path(demo["directory"]) / "docs" / "guide.md"
    original = guide.read_bytes()
    guide.write_text("edited by hand while the plan waited\n")

    text = agents("plan", "apply", plan_id, "--dry-run")
    assert text.exit_code == 0, text.output
    refusal = _docs_refusal(agents.preview(plan_id))
    # The problem and its fix, as the real Apply then gives them.
    assert refusal is not None and refusal.startswith("1 path changed in ")
    assert "since the sandbox was made: guide.md: " in refusal
    assert refusal.endswith("correct the plan (agents plan correct), then apply again")
    assert f"      refused   {refusal}\n" in text.stdout
    assert text.stdout.splitlines()[-1] == (
        "Apply would be refused (exit 3): do what each `refused` line above says, or correct "
        f"the plan; then: agents plan apply {plan_id}"
    )
    applied = agents("plan", "apply", plan_id)
    assert applied.exit_code == 3  # as the dry run said, with its fix once
    assert applied.stderr == f"error: plan {plan_id} was not applied (constrained): {refusal}\n"

    guide.write_bytes(original)
    preview = agents.preview(plan_id)  # Apply · constrained: a retry lands at once
    assert _docs_refusal(preview) is None
    assert "its Apply was stopped (constrained)" in preview["note"]
    assert (preview["verdict"], preview["first"]) == ("lands", None)
    text = agents("plan", "apply", plan_id, "--dry-run")
    assert text.stdout.splitlines()[-1] == f"land it: agents plan apply {plan_id}"
    assert agents("plan", "apply", plan_id).exit_code == 0


def test_no_refusal_for_changes_apply_does_not_mind(agents: Agents) -> None:
    """A real file the plan did not change, edited, and the real guide.md already holding
    the plan's own new content (as an Apply a crash cut short leaves it): Apply lands both
    ways, so the dry run names no refusal."""
    demo = agents.demo()
    plan_id, docs = demo["plan_id"], Path(demo["directory"]) / "docs"
    [work] = [p for p in (agents.home / "sandboxes").rglob("guide.md") if "work" in p.parts]
    (docs / "notes.txt").write_text("mine, not the plan's\n")
    (docs / "guide.md").write_bytes(work.read_bytes())

    preview = agents.preview(plan_id)
    assert _docs_refusal(preview) is None
    assert _by_resource(preview)["docs"] == {"guide.md": "modified"}
    assert (
        agents("plan", "apply", plan_id, "--dry-run")
        .stdout.splitlines()[-1]
        .startswith("land it: ")
    )
    assert agents("plan", "apply", plan_id).exit_code == 0
    assert (docs / "notes.txt").read_text() == "mine, not the plan's\n"


def _refusal_of(doc: dict[str, Any], name: str) -> str | None:
    [found] = [r for p in doc["plans"] for r in p["resources"] if r["resource_id"].endswith(name)]
    refusal: str | None = found["refusal"]
    return refusal


def _git(repository: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repository, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _commits(repository: Path) -> set[str]:
    """Every commit object in the repository, reachable or not."""
    listed = _git(
        repository, "cat-file", "--batch-all-objects", "--batch-check=%(objecttype) %(objectname)"
    )
    return {line.split()[1] for line in listed.splitlines() if line.startswith("commit ")}


def test_the_dry_run_foresees_an_apply_branch_already_taken(agents: Agents, tmp_path: Path) -> None:
    """Someone made the branch Apply would create (`cleveragents/apply/PLAN`) with other
    content: the dry run says Apply would refuse hello-cli, and the real Apply refuses
    (exit 3) with the same reason. The branch deleted, the dry run is clean and Apply lands.
    The user's checkout moving meanwhile (a commit of theirs) is no refusal."""
    demo = agents.demo()
    plan_id, repository = demo["plan_id"], Path(demo["directory"]) / "hello-cli"
    branch = f"cleveragents/apply/{plan_id}"
    _git(repository, "branch", branch)
    (repository / "theirs.txt").write_text("a commit of the user's\n")
    _git(repository, "add", "theirs.txt")
    _git(repository, "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "theirs")
    gc.collect()  # the demo's git sandbox, collected now (see test_the_dry_run_changes_nothing)
    before = (_store_rows(agents.db), _files(tmp_path))

    text = agents("plan", "apply", plan_id, "--dry-run")
    assert text.exit_code == 0, text.output
    assert f"hello-cli (plan {plan_id}): the branch {branch} already exists" in text.stdout
    assert text.stdout.splitlines()[-1].startswith("Apply would be refused (exit 3)")
    refusal = _refusal_of(agents.preview(plan_id), "/hello-cli")
    assert (_store_rows(agents.db), _files(tmp_path)) == before  # read only, branch and all
    assert refusal is not None and f"the branch {branch} already exists" in refusal
    delete = f"git -C {shlex.quote(str(repository.resolve()))} branch -D {branch}"
    assert f"delete it ({delete}), then apply again" in refusal  # its fix
    assert f"      refused   {refusal}\n" in text.stdout
    commits = _commits(repository)
    applied = agents("plan", "apply", plan_id)
    assert applied.exit_code == 3, applied.output  # as the dry run said
    assert f"the branch {branch} already exists" in applied.stderr
    assert applied.stderr.count(delete) == 1 and "put the real resource right" not in applied.stderr
    assert _commits(repository) == commits  # refused before a commit was written

    subprocess.run(["sh", "-c", delete], check=True, capture_output=True)  # the fix, pasted
    assert _refusal_of(agents.preview(plan_id), "/hello-cli") is None
    assert agents("plan", "apply", plan_id).exit_code == 0
    assert _git(repository, "rev-parse", f"{branch}^") == _git(repository, "rev-parse", "HEAD^")


def test_the_dry_run_foresees_a_real_database_row_changed(agents: Agents, tmp_path: Path) -> None:
    """Someone writes, in the real app.db, the row the plan adds (releases/2): the dry run
    says Apply would refuse app-db, naming the row, without a byte written; the real Apply
    refuses (exit 3) for the same reason. The row gone again, the dry run is clean and
    Apply lands the plan's row."""
    demo = agents.demo()
    plan_id, database = demo["plan_id"], Path(demo["directory"]) / "app.db"
    with sqlite3.connect(database) as connection:
        connection.execute("INSERT INTO releases (id, version) VALUES (2, 'by hand')")
    connection.close()
    gc.collect()  # the demo's git sandbox, collected now (see test_the_dry_run_changes_nothing)
    before = (_store_rows(agents.db), _files(tmp_path))

    text = agents("plan", "apply", plan_id, "--dry-run")
    assert text.exit_code == 0, text.output
    assert "      refused   nothing was applied to " in text.stdout
    assert "since the sandbox was made: row (2,) of table releases changed" in text.stdout
    assert text.stdout.splitlines()[-1].startswith("Apply would be refused (exit 3)")
    refusal = _refusal_of(agents.preview(plan_id), "/app-db")
    assert (_store_rows(agents.db), _files(tmp_path)) == before
    assert refusal is not None and "row (2,) of table releases changed: correct the plan" in refusal
    applied = agents("plan", "apply", plan_id)
    assert applied.exit_code == 3, applied.output  # as the dry run said
    assert refusal in applied.stderr

    with sqlite3.connect(database) as connection:
        connection.execute("DELETE FROM releases WHERE id = 2")
    connection.close()
    assert _refusal_of(agents.preview(plan_id), "/app-db") is None
    assert agents("plan", "apply", plan_id).exit_code == 0
    assert _rows(database)["releases"]["2"][1] != "by hand"


def test_a_revert_approved_after_a_refused_apply_is_foreseen(
    agents: Agents, tmp_path: Path
) -> None:
    """Apply refused (a real file changed), and a person approves the question it asked —
    revert to Strategize: `plan apply` then reverts the plan instead of landing it, and the
    dry run says so (without answering or changing anything)."""
    demo = agents.demo()
    plan_id, guide = demo["plan_id"], Path(demo["directory"]) / "docs" / "guide.md"
    guide.write_text("edited by hand while the plan waited\n")
    assert agents("plan", "apply", plan_id).exit_code == 3
    pending = json.loads(agents("approval", "list", "--format=json").stdout)["approvals"]
    [question] = [a for a in pending if a["kind"] == "escalation"]
    assert agents("approval", "approve", question["approval_id"]).exit_code == 0
    gc.collect()  # the demo's git sandbox, collected now (see test_the_dry_run_changes_nothing)
    before = (_store_rows(agents.db), _files(tmp_path))

    preview = agents.preview(plan_id)
    text = agents("plan", "apply", plan_id, "--dry-run")
    assert (_store_rows(agents.db), _files(tmp_path)) == before
    assert (preview["verdict"], preview["first"]) == ("reverts", None)
    assert "a person approved reverting it" in preview["note"]
    assert text.stdout.splitlines()[-1].startswith("Apply would not land it: a person approved")

    applied = agents("plan", "apply", plan_id, "--format=json")  # as the dry run said
    assert applied.exit_code == 0, applied.output
    result = json.loads(applied.stdout)
    assert result["reverted_by"] is not None and result["landed"] == []
    assert result["plan"]["attempt"] == 2 and result["plan"]["state"] != "applied"


def test_a_paused_plan_is_resumed_first(agents: Agents) -> None:
    """Paused at its Apply gate: `plan apply` refuses (exit 2) until it is resumed, and the
    dry run's last line says so, with the command."""
    plan_id = agents.demo()["plan_id"]
    assert agents("plan", "pause", plan_id).exit_code == 0
    preview = agents.preview(plan_id)
    assert (preview["verdict"], preview["first"]) == ("waits", f"agents plan resume {plan_id}")
    text = agents("plan", "apply", plan_id, "--dry-run")
    assert text.stdout.splitlines()[-1] == (
        f"first: agents plan resume {plan_id} (until then `plan apply` refuses, exit 2); "
        f"then land it: agents plan apply {plan_id}"
    )
    _one_line_refusal(agents("plan", "apply", plan_id), "is paused")  # as the dry run said


def _gate_answers(database: Path) -> list[tuple[str, str]]:
    """(answer, by) of every answered Apply gate, oldest first."""
    connection = sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)
    try:
        found = connection.execute(
            "SELECT answer, answered_by FROM approvals WHERE kind = 'apply_gate' "
            "AND answer IS NOT NULL ORDER BY answered_at"
        ).fetchall()
    finally:
        connection.close()
    return [(str(answer), str(by)) for answer, by in found]


def test_as_names_who_the_dry_run_says_approves_and_the_apply_then_does(
    agents: Agents, tmp_path: Path
) -> None:
    """`--as NAME` with --dry-run: the preview says the gate would be approved by NAME
    (you, without it), answers nothing; the real `plan apply --as NAME` then does."""
    plan_id = agents.demo()["plan_id"]
    gc.collect()  # the demo's git sandbox, collected now (see test_the_dry_run_changes_nothing)
    before = (_store_rows(agents.db), _files(tmp_path))
    text = agents("plan", "apply", plan_id, "--dry-run", "--as", "alice")
    assert text.exit_code == 0, text.output
    assert "  the Apply gate would be approved by alice\n" in text.stdout
    shown = agents("plan", "apply", plan_id, "--dry-run", "--as", "alice", "--format=json")
    assert json.loads(shown.stdout)["approved_by"] == "alice"
    assert agents.preview(plan_id)["approved_by"] == getpass.getuser()
    assert (_store_rows(agents.db), _files(tmp_path)) == before
    assert agents("plan", "apply", plan_id, "--as", "alice").exit_code == 0
    assert _gate_answers(agents.db) == [("approved", "alice")]


NAME = "Ann O'Neil; rm -rf ~"  # a name the shell must not split, run or expand


def _run_suggested(agents: Agents, command: str) -> Result:
    """Run ``command`` (``agents ...``, as printed to be copied) as a shell would split it."""
    argv = shlex.split(command)
    assert argv[0] == "agents"
    return agents(*argv[1:])


def test_the_commands_a_dry_run_suggests_keep_as_name(agents: Agents) -> None:
    """`--dry-run --as NAME`: the `plan apply` it suggests (the last line, the JSON
    `command`) keeps `--as NAME`, quoted for the shell, so running it as copied approves
    the gate as NAME, not as whoever runs it."""
    plan_id = agents.demo()["plan_id"]
    text = agents("plan", "apply", plan_id, "--dry-run", "--as", NAME)
    assert text.exit_code == 0, text.output
    command = f"agents plan apply {plan_id} --as {shlex.quote(NAME)}"
    assert text.stdout.splitlines()[-1] == f"land it: {command}"
    shown = agents("plan", "apply", plan_id, "--dry-run", "--as", NAME, "--format=json")
    assert json.loads(shown.stdout)["command"] == command
    assert agents.preview(plan_id)["command"] == f"agents plan apply {plan_id}"  # no --as
    applied = _run_suggested(agents, command)
    assert applied.exit_code == 0, applied.output
    assert _gate_answers(agents.db) == [("approved", NAME)]


def test_a_denied_apply_gate_is_approved_after_all(agents: Agents) -> None:
    """A person denied the Apply gate (the plan paused there): `plan apply` approves it after
    all and lands, so the dry run says `land it`, not `resume it first`."""
    plan_id = agents.demo()["plan_id"]
    pending = json.loads(agents("approval", "list", "--format=json").stdout)["approvals"]
    [gate] = [a for a in pending if a["kind"] == "apply_gate"]
    denied = agents("approval", "deny", gate["approval_id"], "--reason", "not today")
    assert denied.exit_code == 0, denied.output
    preview = agents.preview(plan_id)
    assert preview["state"] == "paused" and "Apply gate was denied" in preview["note"]
    assert (preview["verdict"], preview["first"]) == ("lands", None)
    text = agents("plan", "apply", plan_id, "--dry-run", "--as", "bob")
    assert "  the Apply gate would be approved by bob\n" in text.stdout
    assert text.stdout.splitlines()[-1] == f"land it: agents plan apply {plan_id} --as bob"
    assert agents("plan", "apply", plan_id, "--as", "bob").exit_code == 0  # as it said
    assert _gate_answers(agents.db)[-1] == ("approved", "bob")


def test_files_changed_in_a_sandbox_outside_the_plan_are_asked_about_first(
    agents: Agents, tmp_path: Path
) -> None:
    """Someone edits a file in the plan's git sandbox while it waits at the gate: `plan
    apply` stops to ask whether to keep it (exit 0, nothing lands), and the dry run says so
    first, naming the file; answered, the dry run says `land it` and Apply lands."""
    plan_id = agents.demo()["plan_id"]
    [greet] = [
        p for p in (agents.home / "sandboxes").rglob("greet.py") if p.parent.name == "hello_cli"
    ]
    greet.write_text("print('edited in the sandbox by hand')\n")
    gc.collect()  # the demo's git sandbox, collected now (see test_the_dry_run_changes_nothing)
    before = (_store_rows(agents.db), _files(tmp_path))
    preview = agents.preview(plan_id)
    text = agents("plan", "apply", plan_id, "--dry-run")
    assert (_store_rows(agents.db), _files(tmp_path)) == before
    assert preview["verdict"] == "asks"
    [hello] = [
        r for p in preview["plans"] for r in p["resources"] if r["strategy"] == "git_worktree"
    ]
    assert preview["outside_changes"] == [f"{hello['resource_id']}: hello_cli/greet.py (modified)"]
    assert "  changed outside the plan: " in text.stdout
    assert text.stdout.splitlines()[-1].startswith("Apply would stop to ask first (exit 0")

    applied = agents("plan", "apply", plan_id, "--format=json")  # as the dry run said
    assert applied.exit_code == 0, applied.output
    result = json.loads(applied.stdout)
    assert result["plan"]["state"] == "awaiting_approval" and result["landed"] == []
    pending = json.loads(agents("approval", "list", "--format=json").stdout)["approvals"]
    [question] = [a for a in pending if a["kind"] == "reconcile"]
    assert agents("approval", "approve", question["approval_id"]).exit_code == 0
    preview = agents.preview(plan_id)
    assert (preview["verdict"], preview["outside_changes"]) == ("lands", [])
    assert agents("plan", "apply", plan_id).exit_code == 0


def test_an_apply_as_name_that_stops_to_ask_suggests_answering_as_name(agents: Agents) -> None:
    """`plan apply --as NAME` stops to ask about a file changed in its sandbox outside the
    plan: the answer it suggests keeps `--as NAME`, and run as copied answers as NAME."""
    plan_id = agents.demo()["plan_id"]
    [greet] = [
        p for p in (agents.home / "sandboxes").rglob("greet.py") if p.parent.name == "hello_cli"
    ]
    greet.write_text("print('edited in the sandbox by hand')\n")
    applied = agents("plan", "apply", plan_id, "--as", NAME)
    assert applied.exit_code == 0, applied.output
    pending = json.loads(agents("approval", "list", "--format=json").stdout)["approvals"]
    [question] = [a for a in pending if a["kind"] == "reconcile"]
    approve = f"agents approval approve {question['approval_id']} --as {shlex.quote(NAME)}"
    assert f"  ({approve})\n" in applied.stdout
    assert _run_suggested(agents, approve).exit_code == 0
    answered = json.loads(agents("approval", "list", "--all", "--format=json").stdout)
    [asked] = [a for a in answered["approvals"] if a["approval_id"] == question["approval_id"]]
    assert asked["answered_by"] == NAME


def test_a_sandbox_gone_is_foreseen_as_a_refusal(agents: Agents) -> None:
    """The child plan's docs sandbox removed by hand: Apply cannot open it and refuses
    (exit 3); the dry run says so for that resource, instead of `land it`."""
    demo = agents.demo()
    plan_id = demo["plan_id"]
    [docs_root] = [p for p in (agents.home / "sandboxes").glob("*/*__docs") if p.is_dir()]
    shutil.rmtree(docs_root)
    preview = agents.preview(plan_id)
    refusal = _refusal_of(preview, "/docs")
    assert refusal is not None and "has no sandbox of" in refusal
    assert preview["verdict"] == "refused"
    applied = agents("plan", "apply", plan_id)
    assert applied.exit_code == 3, applied.output  # as the dry run said
    assert refusal in applied.stderr
