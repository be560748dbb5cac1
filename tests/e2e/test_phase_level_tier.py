"""The phase-level tier (ADR-035, "Three Rollback Tiers" and "Phase Boundary Interaction"):
correcting the strategy while the plan is in Execute rolls back all Execute work of every
resource. A sandbox without checkpoints (checkpointing off) is made anew from the real
resource; the preview names the tier and lists that resource as rolled back (recreated).
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cleveragents_tui import failpoints
from cleveragents_tui.cli import cli, render
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, Phase, PlanState
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.rollback import ResourceOutcome
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.model import CorrectionRefusedError, Tier
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.read.browse import show_plan
from cleveragents_tui.engine.run.lifecycle import apply_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.support.flag_profiles import register_profile
from tests.support.folders import add_folder

REPO = "local/repo"
DOCS = "local/docs"
CLASS = "use a class"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def write(resource: str, path: str) -> dict[str, Any]:
    return {
        "tool": "local/write-file",
        "arguments": {"resource": resource, "path": path, "content": f"{path}\n"},
    }


def action() -> Action:
    """Two strategies whose implementations write different files to both resources, and a
    step every strategy has."""
    return Action.model_validate(
        {
            "name": "local/greeting",
            "prompt": "add a greeting",
            "resources": [REPO, DOCS],
            "decisions": [
                {
                    "key": "strategy",
                    "type": "strategy_choice",
                    "question": "How is the greeting structured?",
                    "alternatives": [
                        {"option": "a plain function", "match": ["function", "plain"]},
                        {"option": "a greeter class", "match": ["class", "greeter"]},
                    ],
                },
                {
                    "key": "implement-function",
                    "type": "implementation_choice",
                    "parent": "strategy",
                    "when": {"strategy": "a plain function"},
                    "question": "Write it?",
                    "alternatives": [
                        {
                            "option": "greet.py and its page",
                            "tool_calls": [write(REPO, "greet.py"), write(DOCS, "function.md")],
                        }
                    ],
                },
                {
                    "key": "implement-class",
                    "type": "implementation_choice",
                    "parent": "strategy",
                    "when": {"strategy": "a greeter class"},
                    "question": "Write it?",
                    "alternatives": [
                        {
                            "option": "greeter.py and its page",
                            "tool_calls": [write(REPO, "greeter.py"), write(DOCS, "class.md")],
                        }
                    ],
                },
                {
                    "key": "notes",
                    "type": "tool_invocation",
                    "parent": "strategy",
                    "question": "Leave a note?",
                    "alternatives": [
                        {"option": "NOTES.md", "tool_calls": [write(REPO, "NOTES.md")]}
                    ],
                },
            ],
        }
    )


def register(store: Store, tmp_path: Path, *, repo_checkpoints: bool) -> tuple[Path, Path]:
    """A git repository (checkpointing as asked) and a folder (checkpointed), registered."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.invalid")
    git(repo, "config", "user.name", "Test")
    (repo / "app.py").write_text("print('hi')\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# guide\n")
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id=REPO,
                kind="git",
                location=str(repo),
                sandbox_strategy="git_worktree",
                checkpoint_enabled=repo_checkpoints,
            )
        )
        uow.commit()
    add_folder(store, DOCS, docs)
    return repo, docs


@pytest.fixture
def options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunOptions:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    return RunOptions(sandbox_base=tmp_path / "sandboxes")


def no_checkpoints(store: Store) -> str:
    """``auto`` without require_checkpoints: a resource with checkpointing off is refused at
    pre-flight under a profile that requires checkpoints."""
    return register_profile(
        store, "no-checkpoints", base="auto", safety={"require_checkpoints": False}
    ).name


def at_apply_gate(store: Store, options: RunOptions) -> tuple[Plan, dict[str, str]]:
    plan = start_plan(store, action(), profile_override=no_checkpoints(store), options=options)
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    with store.unit_of_work() as uow:
        keys = {
            d.step_key: d.decision_id
            for d in uow.decisions.for_plan(plan.plan_id, include_superseded=False)
            if d.step_key
        }
    return plan, keys


def applied_files(repo: Path, plan_id: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", f"cleveragents/apply/{plan_id}").split())


@pytest.mark.parametrize(
    ("repo_checkpoints", "tier", "recreated"),
    [(False, Tier.PHASE, (REPO,)), (True, Tier.FULL, ())],
    ids=["checkpointing-off", "checkpointing-on"],
)
def test_a_strategy_correction_in_execute_rolls_back_all_execute_work_of_every_resource(
    tmp_path: Path,
    sqlite_store: Store,
    options: RunOptions,
    repo_checkpoints: bool,
    tier: Tier,
    recreated: tuple[str, ...],
) -> None:
    # Given a plan at its Apply gate that implemented the function strategy in both resources
    repo, docs = register(sqlite_store, tmp_path, repo_checkpoints=repo_checkpoints)
    plan, keys = at_apply_gate(sqlite_store, options)
    # When the strategy is corrected
    impact = preview(sqlite_store, keys["strategy"], CorrectionMode.REVERT, CLASS)
    # Then the preview names the tier and rolls back every resource, none unaffected
    assert impact.tier is tier
    assert impact.phase_change == (Phase.EXECUTE, Phase.STRATEGIZE)
    assert impact.rollbackable == (DOCS, REPO)
    assert impact.recreated == recreated
    assert impact.unaffected == ()
    assert {keys["implement-function"], keys["notes"]} <= set(impact.affected_decisions)
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.correction.status is CorrectionStatus.SUCCEEDED
    assert result.report is not None
    expected = ResourceOutcome.RECREATED if recreated else ResourceOutcome.ROLLED_BACK
    assert result.report.outcome_of(REPO) is expected
    # and the replay, then Apply, land only the new strategy's work (and the common step's)
    assert apply_plan(sqlite_store, plan.plan_id, "ana", options).state is PlanState.APPLIED
    files = applied_files(repo, plan.plan_id)
    assert files == {"app.py", "greeter.py", "NOTES.md"}
    assert sorted(p.name for p in docs.iterdir()) == ["class.md", "guide.md"]


def test_the_preview_cli_names_the_phase_level_tier_and_the_recreated_resource(
    tmp_path: Path, sqlite_store: Store, sqlite_url: str, options: RunOptions
) -> None:
    register(sqlite_store, tmp_path, repo_checkpoints=False)
    _, keys = at_apply_gate(sqlite_store, options)
    shown = CliRunner().invoke(
        cli,
        [
            *("--db", sqlite_url, "plan", "correct", keys["strategy"]),
            *("--mode=revert", "--guidance", CLASS, "--dry-run"),
        ],
        catch_exceptions=False,
    )
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert "rollback tier  phase-level" in lines
    assert [
        line.split() for line in lines if line.startswith(("  rolled back", "  unaffected"))
    ] == [
        ["rolled", "back", f"{DOCS},", REPO, "(recreated)"],
        ["unaffected", "-"],
    ]


def test_the_tier_is_named_for_an_append_and_an_execute_decision_is_still_refused(
    tmp_path: Path, sqlite_store: Store, options: RunOptions
) -> None:
    register(sqlite_store, tmp_path, repo_checkpoints=False)
    _, keys = at_apply_gate(sqlite_store, options)
    appended = preview(sqlite_store, keys["notes"], CorrectionMode.APPEND, "a longer note")
    assert appended.tier is Tier.PHASE
    with pytest.raises(CorrectionRefusedError, match="checkpointing is disabled for this plan"):
        preview(sqlite_store, keys["implement-function"], CorrectionMode.REVERT, CLASS)


def test_a_sandbox_that_cannot_be_made_anew_leaves_every_resource_as_it_was(
    tmp_path: Path, sqlite_store: Store, options: RunOptions, monkeypatch: pytest.MonkeyPatch
) -> None:
    register(sqlite_store, tmp_path, repo_checkpoints=False)
    plan, keys = at_apply_gate(sqlite_store, options)
    impact = preview(sqlite_store, keys["strategy"], CorrectionMode.REVERT, CLASS)
    monkeypatch.setenv(failpoints.ENV_VAR, f"rollback.recreate@{REPO}")
    failpoints.reset()
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.correction.status is CorrectionStatus.FAILED
    assert result.plan.state is PlanState.ERRORED
    assert result.report is not None
    assert result.report.outcome_of(DOCS) is ResourceOutcome.RESTORED
    assert result.report.outcome_of(REPO) is ResourceOutcome.FAILED
    shown = render.plan_details(show_plan(sqlite_store, plan.plan_id))  # agents plan show
    listed = next(line for line in shown.splitlines() if result.correction.correction_id in line)
    assert listed.endswith(
        f" · failed · attempt 2 · by ana: {REPO} did not roll back (making the sandbox anew "
        f"failed: injected fault at rollback.recreate@{REPO})"
    ), listed
    sandboxes = PlanSandboxes(sqlite_store, plan.plan_id, options.sandbox_base)
    for resource_id, written in ((DOCS, "function.md"), (REPO, "greet.py")):
        workdir = sandboxes.get(resource_id).workdir
        assert workdir is not None and (workdir / written).exists()


def test_folder_overlay_and_database_sandboxes_without_checkpoints_are_made_anew(
    tmp_path: Path, sqlite_store: Store, options: RunOptions
) -> None:
    folder, overlay, database = tmp_path / "folder", tmp_path / "overlay", tmp_path / "app.db"
    for real in (folder, overlay):
        real.mkdir()
        (real / "kept.txt").write_text("kept\n")
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, v TEXT)")
    connection.close()
    strategies = {"folder": "filesystem_copy", "overlay": "overlay", "db": "transaction_rollback"}
    locations = {"folder": folder, "overlay": overlay, "db": database}
    with sqlite_store.unit_of_work(write=True) as uow:
        for name, strategy in strategies.items():
            uow.resources.add(
                Resource(
                    resource_id=f"local/{name}",
                    kind="database" if name == "db" else "filesystem",
                    location=str(locations[name]),
                    sandbox_strategy=strategy,
                    checkpoint_enabled=False,
                )
            )
        uow.commit()

    def work(tag: str) -> list[dict[str, Any]]:
        sql = {"sql": "INSERT INTO t (v) VALUES (:v)", "params": {"v": tag}}
        return [
            write("local/folder", f"{tag}.txt"),
            write("local/overlay", f"{tag}.txt"),
            {"tool": "local/run-sql", "arguments": {"resource": "local/db", **sql}},
        ]

    definition = action().model_dump(mode="json")
    definition["resources"] = [f"local/{name}" for name in strategies]
    definition["decisions"][1]["alternatives"][0]["tool_calls"] = work("function")
    definition["decisions"][2]["alternatives"][0]["tool_calls"] = work("class")
    del definition["decisions"][3]  # the note goes to the git repository of the other tests
    plan = start_plan(
        sqlite_store,
        Action.model_validate(definition),
        profile_override=no_checkpoints(sqlite_store),
        options=options,
    )
    with sqlite_store.unit_of_work() as uow:
        chosen = next(d for d in uow.decisions.for_plan(plan.plan_id) if d.step_key == "strategy")

    impact = preview(sqlite_store, chosen.decision_id, CorrectionMode.REVERT, CLASS)
    assert impact.tier is Tier.PHASE
    assert impact.recreated == impact.rollbackable == ("local/db", "local/folder", "local/overlay")
    execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert apply_plan(sqlite_store, plan.plan_id, "ana", options).state is PlanState.APPLIED

    for real in (folder, overlay):
        assert sorted(p.name for p in real.iterdir()) == ["class.txt", "kept.txt"]
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT id, v FROM t").fetchall() == [(1, "class")]
        assert connection.execute("SELECT seq FROM sqlite_sequence").fetchall() == [(1,)]
    connection.close()
