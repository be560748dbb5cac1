"""A running plan whose agent tries to leave its database through ``local/run-sql``: the
escape is a tool error, and Apply lands exactly the rows the plan wrote in its own database,
on SQLite and PostgreSQL (issue 21, item 2)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.engine.run.approvals import answer_approval, pending_approvals
from cleveragents_tui.engine.run.lifecycle import apply_plan, resume_plan
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.e2e.test_run_sql_statements import DB, Target, options, target

__all__ = ["options", "target"]  # fixtures used here


def run_sql(statement: str) -> dict[str, Any]:
    return {"tool": "local/run-sql", "arguments": {"resource": DB, "sql": statement}}


def action(escapes: list[str]) -> Action:
    return Action.model_validate(
        {
            "name": "local/escape",
            "prompt": "keep a file, and try to leave the database",
            "resources": [DB],
            "decisions": [
                {
                    "key": "escape",
                    "type": "implementation_choice",
                    "question": "Write where?",
                    "alternatives": [
                        {
                            "option": "everywhere",
                            "tool_calls": [
                                *(run_sql(sql) for sql in escapes),
                                {
                                    "tool": "local/run-sql",
                                    "arguments": {
                                        "resource": DB,
                                        "sql": "INSERT INTO files VALUES ('kept.txt', :data)",
                                        "blobs": {"data": "aw=="},
                                    },
                                },
                            ],
                        }
                    ],
                }
            ],
        }
    )


def test_an_escaping_plan_applies_only_its_own_rows(
    sqlite_store: Store, options: RunOptions, target: Target, tmp_path: Path
) -> None:
    victim = tmp_path / "victim.db"
    if target.url.startswith("sqlite"):
        escapes = [
            f"; ATTACH DATABASE '{victim}' AS v",
            "CREATE TABLE v.stolen AS SELECT * FROM main.files",
            f"ATTACH DATABASE '{tmp_path / 'agents.db'}' AS engine",
            f"VACUUM INTO '{victim}'",
            "PRAGMA writable_schema = 1",
        ]
    else:
        escapes = [
            f"COPY files TO '{victim}'",
            f"COPY files TO PROGRAM 'touch {victim}'",
            "SELECT pg_read_file('/etc/hostname')",
        ]
    plan = start_plan(sqlite_store, action(escapes), profile_override="auto", options=options)
    # Each refused call is retried, then waits for a person (engine/run/failures.py), who
    # accepts the refusal; the plan goes on to the next call, then to its Apply gate.
    while gates := [
        a for a in pending_approvals(sqlite_store, plan.plan_id) if a.kind.value != "apply_gate"
    ]:
        for gate in gates:
            answer_approval(sqlite_store, gate.approval_id, approve=True, by="ana")
        plan = resume_plan(sqlite_store, plan.plan_id, options)
    assert plan.state is PlanState.AWAITING_APPROVAL, plan
    with sqlite_store.unit_of_work() as uow:
        calls = [
            call
            for decision in uow.decisions.for_plan(plan.plan_id, include_superseded=False)
            for call in uow.tool_invocations.for_decision(decision.decision_id)
        ]
    refused = {call.arguments["sql"]: call for call in calls if not call.ok}
    assert set(refused) == set(escapes), [c.arguments for c in calls]
    assert [call.ok for call in calls if call.arguments.get("blobs")] == [True]
    for call in refused.values():  # the table in the unattached schema is simply unknown
        out = call.output or ""
        assert "refused in the sandbox of" in out or "unknown database v" in out, out
        assert "\n" not in out
    applied = apply_plan(sqlite_store, plan.plan_id, "ana", options)
    assert applied.state is PlanState.APPLIED
    assert target.rows() == {"old.bin": b"\x01\x02", "kept.txt": b"k"}
    assert not victim.exists()
    if target.url.startswith("sqlite"):
        with sqlite3.connect(tmp_path / "files.db") as connection:
            assert [row[1] for row in connection.execute("PRAGMA database_list")] == ["main"]
