"""Strategize is read-only, and its actor reads before it decides: a Strategize decision's
calls of tools that read run (the sandboxes are made for them), and nothing else does.

On the demo: its ``strategy`` point reads ``hello_cli/app.py`` and also names a write. The
oracle is the demo as it ships, run and applied: the plan lands the same tree and rows.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.run.lifecycle import apply_plan
from cleveragents_tui.engine.run.runner import RunOptions
from cleveragents_tui.store.store import Store
from tests.e2e.test_corrections import decisions_by_key, run_demo
from tests.e2e.test_fix_then_revalidate import _landed


def test_a_strategy_decision_reads_and_writes_nothing(
    tmp_path: Path, sqlite_store: Store, options: RunOptions
) -> None:
    demo = build_demo(sqlite_store, tmp_path / "demo")
    data = yaml.safe_load(demo.action_file.read_text(encoding="utf-8"))
    [strategy] = [d for d in data["decisions"] if d["key"] == "strategy"]
    resource = f"{demo.namespace}/hello-cli"
    for alternative in strategy["alternatives"]:
        alternative["tool_calls"] = [
            {
                "tool": "local/read-file",
                "arguments": {"resource": resource, "path": "hello_cli/app.py"},
            },
            {
                "tool": "local/write-file",
                "arguments": {"resource": resource, "path": "PLANNED.md", "content": "no\n"},
            },
        ]
    demo.action_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")

    plan = run_demo(sqlite_store, demo, options)

    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    decided = decisions_by_key(sqlite_store, plan.plan_id)["strategy"]
    with sqlite_store.unit_of_work() as uow:
        [read] = uow.tool_invocations.for_decision(decided)
    app = (demo.repository / "hello_cli" / "app.py").read_text(encoding="utf-8")
    assert (read.tool, read.ok) == ("local/read-file", True)
    assert app.splitlines()[0] in (read.output or "")
    applied = apply_plan(sqlite_store, plan.plan_id, "ana", options)
    assert applied.state is PlanState.APPLIED, applied

    oracle = build_demo(sqlite_store, tmp_path / "oracle")
    shipped = run_demo(sqlite_store, oracle, options)
    apply_plan(sqlite_store, shipped.plan_id, "ana", options)
    assert _landed(demo) == _landed(oracle)  # no PLANNED.md: the write did not run
