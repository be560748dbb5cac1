"""A revert never erases the work of a decision the tree still shows as current.

Reverting the demo's ``implementation_choice`` rolls hello-cli and app-db back to before
it, which erases what the later ``test`` (tests/test_hello.py) and ``record`` (the release
row) decisions wrote. Those decisions are re-made — the preview lists them under their own
heading — so the applied result is exactly what the corrected tree says: the oracle is a
fresh plan of the same action, applied to a fresh copy of the demo.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from cleveragents_tui.domain.enums import CorrectionMode, PlanState
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.demo.demo import DemoEnvironment, build_demo
from cleveragents_tui.engine.run.lifecycle import apply_plan
from cleveragents_tui.engine.run.runner import RunOptions
from cleveragents_tui.store.store import Store
from tests.e2e.test_corrections import decisions_by_key, run_demo

SAME_FUNCTION = "write it as a hello() function in greet.py"


def applied_tree(repository: Path, plan_id: str) -> list[str]:
    """Mode, blob and path of every file of the branch Apply made."""
    listing = subprocess.run(
        ["git", "-C", str(repository), "ls-tree", "-r", f"cleveragents/apply/{plan_id}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return sorted(listing.splitlines())


def database_dump(database: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(database) as connection:
        rows = [("releases", *r) for r in connection.execute("SELECT * FROM releases ORDER BY id")]
        rows += [("schema", *r) for r in connection.execute("SELECT * FROM sqlite_master")]
    connection.close()
    return rows


def folder(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def test_reverting_the_implementation_re_makes_the_later_test_and_release_row(
    tmp_path: Path, sqlite_store: Store, demo: DemoEnvironment, options: RunOptions
) -> None:
    # Given the demo at its Apply gate
    plan = run_demo(sqlite_store, demo, options)
    before = decisions_by_key(sqlite_store, plan.plan_id)
    # When its implementation_choice is reverted, the preview names the later decisions
    # whose work the rollback erases
    # (its point has one alternative: the user names it, as `--choose 1` does)
    impact = preview(
        sqlite_store, before["implement-function"], CorrectionMode.REVERT, SAME_FUNCTION, choose=1
    )
    assert [(r.step_key, r.resources) for r in impact.remade] == [
        ("test", (f"{demo.namespace}/hello-cli",)),
        ("record", (f"{demo.namespace}/app-db",)),
    ]
    assert {before["test"], before["record"]} <= set(impact.affected_decisions)
    assert before["keep-api"] not in impact.affected_decisions
    result = execute(sqlite_store, impact, acknowledged=True, requested_by="ana", options=options)
    assert result.plan.state is PlanState.AWAITING_APPROVAL
    # Then they were made again (nothing the tree shows as current has vanished)
    after = decisions_by_key(sqlite_store, plan.plan_id)
    assert after["test"] != before["test"] and after["record"] != before["record"]
    assert after["strategy"] == before["strategy"] and after["docs"] == before["docs"]
    applied = apply_plan(sqlite_store, plan.plan_id, by="ana", options=options)
    assert applied.state is PlanState.APPLIED
    tree = applied_tree(demo.repository, plan.plan_id)
    assert any(line.endswith("\ttests/test_hello.py") for line in tree)
    assert ("releases", 2, "1.1.0", "hello NAME command") in database_dump(demo.database)

    # And the applied result equals that of a fresh plan of the same action
    fresh = build_demo(sqlite_store, tmp_path / "fresh")
    oracle = run_demo(sqlite_store, fresh, options)
    apply_plan(sqlite_store, oracle.plan_id, by="ana", options=options)
    assert tree == applied_tree(fresh.repository, oracle.plan_id)
    assert database_dump(demo.database) == database_dump(fresh.database)
    assert folder(demo.docs) == folder(fresh.docs)
