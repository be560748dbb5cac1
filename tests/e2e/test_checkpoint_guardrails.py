"""``safety.require_checkpoints`` and the checkpoint budget, in running plans.

Under a profile that requires checkpoints, pre-flight refuses a resource whose checkpointing
is off (nothing is stored). The budget (``checkpoint_max_per_plan``) bounds each resource's
checkpoints within one plan: the plan's oldest intermediate checkpoints are pruned, and
another plan on the same resource has a budget of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cleveragents_tui.cli import cli
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import CorrectionMode, Phase, PlanState
from cleveragents_tui.engine.core.rollback import RollbackRefusedError
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.support.flag_profiles import register_profile
from tests.support.folders import add_folder

RESOURCE = "local/files"


def _action(writes: int) -> dict[str, Any]:
    decisions: list[dict[str, Any]] = [
        {
            "key": "layout",
            "type": "strategy_choice",
            "question": "Which layout?",
            "alternatives": [{"option": "one file per step"}],
        }
    ]
    for n in range(writes):
        decisions.append(
            {
                "key": f"write-{n}",
                "type": "implementation_choice",
                "parent": "layout",
                "question": f"Write file {n}?",
                "alternatives": [
                    {
                        "option": f"{n}.txt",
                        "tool_calls": [
                            {
                                "tool": "local/write-file",
                                "arguments": {
                                    "resource": RESOURCE,
                                    "path": f"{n}.txt",
                                    "content": f"{n}\n",
                                },
                            }
                        ],
                    }
                ],
            }
        )
    return {
        "name": "local/steps",
        "prompt": "write files",
        "resources": [RESOURCE],
        "decisions": decisions,
    }


def _register(store: Store, folder: Path, **settings: Any) -> None:
    add_folder(store, RESOURCE, folder, **settings)


def test_plan_use_refuses_a_resource_with_checkpointing_off(
    sqlite_url: str, tmp_path: Path
) -> None:
    store = Store.open(sqlite_url)
    try:
        _register(store, tmp_path / "files", checkpoint_enabled=False)
        register_profile(
            store, "no-checkpoints", base="auto", safety={"require_checkpoints": False}
        )
    finally:
        store.close()
    action_file = tmp_path / "steps.yaml"
    action_file.write_text(yaml.safe_dump(_action(1)))
    runner = CliRunner()
    env = {"AGENTS_SANDBOX_DIR": str(tmp_path / "sandboxes")}
    refused = runner.invoke(
        cli,
        ["--db", sqlite_url, "plan", "use", str(action_file), "--automation-profile", "auto"],
        env=env,
    )
    assert refused.exit_code == 2, refused.output
    [line] = refused.stderr.splitlines()
    assert "pre-flight check 'rollback feasibility' failed" in line
    assert f"resource {RESOURCE} has checkpointing off" in line and "require_checkpoints" in line
    listed = runner.invoke(cli, ["--db", sqlite_url, "plan", "list", "--format=json"])
    assert '"plans": []' in listed.output  # nothing stored

    use = ["--db", sqlite_url, "plan", "use", str(action_file), "--automation-profile"]
    allowed = runner.invoke(cli, [*use, "local/no-checkpoints"], env=env)
    assert allowed.exit_code == 0, allowed.output
    assert "awaiting_approval" in allowed.output  # ran to its Apply gate


def test_the_budget_prunes_within_a_plan_and_each_plan_has_its_own(
    sqlite_store: Store, tmp_path: Path
) -> None:
    _register(sqlite_store, tmp_path / "files", checkpoint_max_per_plan=2)
    options = RunOptions(sandbox_base=tmp_path / "sandboxes")
    first = start_plan(
        sqlite_store, Action.model_validate(_action(3)), profile_override="auto", options=options
    )
    second = start_plan(
        sqlite_store, Action.model_validate(_action(1)), profile_override="auto", options=options
    )
    for plan in (first, second):
        assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    with sqlite_store.unit_of_work() as uow:
        mine = uow.checkpoints.for_plan(first.plan_id, RESOURCE)
        theirs = uow.checkpoints.for_plan(second.plan_id, RESOURCE)
        middle = next(d for d in uow.decisions.for_plan(first.plan_id) if d.step_key == "write-1")
    live = [c for c in mine if c.pruned_at is None]
    assert len(live) == 2 and len(mine) > 2  # first and latest kept, the rest pruned
    assert (live[0], live[-1]) == (mine[0], mine[-1])
    assert all(c.pruned_at is None for c in theirs)  # the first plan's budget is not theirs
    with pytest.raises(RollbackRefusedError, match="pruned by the checkpoint budget"):
        preview(
            sqlite_store,
            middle.decision_id,
            CorrectionMode.REVERT,
            "write 1 differently",
            sandbox_base=options.sandbox_base,
        )
