"""A revert and files edited by hand in a sandbox it rolls back (issue 20, item 2): the
preview lists them, ``--yes`` alone refuses, ``--outside-changes=keep`` keeps them on top
of the replay (and Apply lands them), ``--outside-changes=discard`` discards them — each
recorded as reconciliation records it (docs/reconciliation.md)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.read.tui_queries import recent_events
from cleveragents_tui.store.store import Store
from tests.cli.conftest import Run

README_EDIT = "\nEdited by hand while the plan waited.\n"
NOTES = "notes/NOTES.md"


@pytest.fixture
def edited(run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """The demo plan at its Apply gate, and a hand edit in its hello-cli sandbox."""
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    doc = json.loads(run("demo", "--dir", str(tmp_path / "demo"), "--format=json").output)
    plan_id = doc["plan_id"]
    tree = json.loads(run("plan", "tree", plan_id, "--format=json").output)
    keys = {d["chosen_option"]: d["decision_id"] for d in tree["decisions"]}
    store = Store.open(f"sqlite:///{tmp_path / 'agents.db'}")
    try:
        resource = next(
            r.resource_id for r in _resources(store) if r.resource_id.endswith("/hello-cli")
        )
        workdir = PlanSandboxes(store, plan_id, tmp_path / "sandboxes").get(resource).workdir
    finally:
        store.close()
    assert workdir is not None
    with (workdir / "README.md").open("a", encoding="utf-8") as readme:
        readme.write(README_EDIT)
    (workdir / "notes").mkdir()
    (workdir / NOTES).write_text("remember the release\n", "utf-8")
    return {
        "plan": plan_id,
        "target": keys["hello_cli/greet.py with a hello() function"],
        "workdir": workdir,
        "repo": tmp_path / "demo" / "hello-cli",
        "db": tmp_path / "agents.db",
    }


def _resources(store: Store) -> list[Resource]:
    with store.unit_of_work() as uow:
        return list(uow.resources.all())


def _correct(run: Run, edited: dict[str, object], *extra: str) -> Result:
    return run(
        "plan",
        "correct",
        str(edited["target"]),
        "--mode=revert",
        "--guidance",
        "write it again",
        "--choose",
        "1",
        *extra,
    )


def _events(edited: dict[str, object]) -> list[str]:
    store = Store.open(f"sqlite:///{edited['db']}")
    try:
        return [e.kind for e in recent_events(store, str(edited["plan"]), limit=200)]
    finally:
        store.close()


def _applied_files(run: Run, edited: dict[str, object]) -> dict[str, str]:
    result = run("plan", "apply", str(edited["plan"]))
    assert result.exit_code == 0, result.output
    branch = f"cleveragents/apply/{edited['plan']}"
    repo = str(edited["repo"])

    def show(path: str) -> str:
        done = subprocess.run(
            ["git", "-C", repo, "show", f"{branch}:{path}"], capture_output=True, text=True
        )
        return done.stdout if done.returncode == 0 else "<absent>"

    return {"README.md": show("README.md"), NOTES: show(NOTES)}


def test_the_preview_lists_the_files_changed_outside_the_plan(
    run: Run, edited: dict[str, object]
) -> None:
    text = _correct(run, edited, "--dry-run")
    assert text.exit_code == 0, text.output
    assert "changed outside the plan in sandboxes the revert rolls back\n" in text.output
    assert f"{NOTES} (added)" in text.output and "README.md (modified)" in text.output
    assert "--outside-changes=keep|discard" in text.output
    doc = json.loads(_correct(run, edited, "--dry-run", "--format=json").output)
    [change] = doc["outside_changes"]
    assert change["resource_id"].endswith("/hello-cli")
    assert change["added"] == ["notes", NOTES] and change["modified"] == ["README.md"]


def test_yes_alone_refuses_and_changes_nothing(run: Run, edited: dict[str, object]) -> None:
    result = _correct(run, edited, "--yes")
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: the revert would roll back 3 files changed outside")
    assert "--outside-changes=keep" in line and "--outside-changes=discard" in line
    plan = json.loads(run("plan", "show", str(edited["plan"]), "--format=json").output)
    assert plan["corrections"] == [] and plan["plan"]["attempt"] == 1
    workdir = Path(str(edited["workdir"]))
    assert (workdir / "README.md").read_text("utf-8").endswith(README_EDIT)
    assert (workdir / NOTES).exists()
    assert "sandbox_changed_outside" not in _events(edited)


def test_keep_puts_the_edits_on_top_of_the_replay_and_apply_lands_them(
    run: Run, edited: dict[str, object]
) -> None:
    result = _correct(run, edited, "--yes", "--outside-changes=keep")
    assert result.exit_code == 0, result.output
    assert "succeeded (attempt 2)" in result.output
    workdir = Path(str(edited["workdir"]))
    assert (workdir / "README.md").read_text("utf-8").endswith(README_EDIT)
    assert (workdir / NOTES).read_text("utf-8") == "remember the release\n"
    assert (workdir / "hello_cli" / "greet.py").exists()  # the replay made it again
    kinds = _events(edited)
    assert "sandbox_changed_outside" in kinds and "outside_changes_kept" in kinds
    landed = _applied_files(run, edited)
    assert landed["README.md"].endswith(README_EDIT)
    assert landed[NOTES] == "remember the release\n"


def test_discard_rolls_the_edits_back_and_records_it(run: Run, edited: dict[str, object]) -> None:
    result = _correct(run, edited, "--yes", "--outside-changes=discard")
    assert result.exit_code == 0, result.output
    workdir = Path(str(edited["workdir"]))
    assert README_EDIT not in (workdir / "README.md").read_text("utf-8")
    assert not (workdir / NOTES).exists()
    kinds = _events(edited)
    assert "sandbox_changed_outside" in kinds and "outside_changes_discarded" in kinds
    landed = _applied_files(run, edited)
    assert README_EDIT not in landed["README.md"] and landed[NOTES] == "<absent>"


def test_asked_without_yes_cancel_changes_nothing(edited: dict[str, object]) -> None:
    args = ["--db", str(edited["db"]), "plan", "correct", str(edited["target"])]
    args += ["--mode=revert", "--guidance", "again", "--choose", "1"]
    asked = CliRunner().invoke(cli, args, input="y\ny\ncancel\n")
    assert asked.exit_code == 1
    assert "keep them, discard them, or cancel?" in asked.output
    assert "Correction cancelled: nothing was changed." in asked.output
    assert "sandbox_changed_outside" not in _events(edited)
