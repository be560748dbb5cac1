"""Execute → Strategize phase reversion when the execution actor finds the strategy too tight."""

from __future__ import annotations

from pathlib import Path

import pytest

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store

REASON = "one file cannot hold all parts; use the split layout"


def action(resource: str) -> Action:
    return Action.model_validate(
        {
            "name": "local/parts",
            "prompt": "write the parts",
            "resources": [resource],
            "decisions": [
                {
                    "key": "layout",
                    "type": "strategy_choice",
                    "question": "Which layout?",
                    "alternatives": [
                        {"option": "a single file", "match": ["single"]},
                        {"option": "a split layout", "match": ["split", "layout"]},
                    ],
                },
                {
                    "key": "write-single",
                    "type": "implementation_choice",
                    "parent": "layout",
                    "when": {"layout": "a single file"},
                    "question": "Write it?",
                    "alternatives": [
                        {
                            "option": "give up on one file",
                            "rationale": REASON,
                            "revise_strategy": "layout",
                        }
                    ],
                },
                {
                    "key": "write-split",
                    "type": "implementation_choice",
                    "parent": "layout",
                    "when": {"layout": "a split layout"},
                    "question": "Write it?",
                    "alternatives": [
                        {
                            "option": "two files",
                            "tool_calls": [
                                {
                                    "tool": "local/write-file",
                                    "arguments": {
                                        "resource": resource,
                                        "path": "a.txt",
                                        "content": "a",
                                    },
                                },
                                {
                                    "tool": "local/write-file",
                                    "arguments": {
                                        "resource": resource,
                                        "path": "b.txt",
                                        "content": "b",
                                    },
                                },
                            ],
                        }
                    ],
                },
            ],
        }
    )


@pytest.fixture
def files(sqlite_store: Store, tmp_path: Path) -> Resource:
    (tmp_path / "files").mkdir()
    resource = Resource(
        resource_id="local/files",
        kind="filesystem",
        location=str(tmp_path / "files"),
        sandbox_strategy="filesystem_copy",
    )
    with sqlite_store.unit_of_work(write=True) as uow:
        uow.resources.add(resource)
        uow.commit()
    return resource


def test_the_plan_reverts_to_strategize_and_replays_with_the_actors_reason(
    sqlite_store: Store, files: Resource, tmp_path: Path
) -> None:
    plan = start_plan(
        sqlite_store,
        action(files.resource_id),
        profile_override="auto",
        options=RunOptions(sandbox_base=tmp_path / "sandboxes"),
    )
    assert (plan.phase, plan.state) == (
        Phase.EXECUTE,
        PlanState.AWAITING_APPROVAL,
    )  # the Apply gate
    with sqlite_store.unit_of_work() as uow:
        current = {
            d.step_key: d for d in uow.decisions.for_plan(plan.plan_id, include_superseded=False)
        }
        [correction] = uow.corrections.for_plan(plan.plan_id)
    assert current["layout"].chosen_option == "a split layout" and current["layout"].is_correction
    assert "write-split" in current and "write-single" not in current
    assert (correction.requested_by, correction.guidance) == ("execution actor", REASON)
    assert plan.attempt == 2


def test_below_the_delete_content_threshold_a_person_is_asked(
    sqlite_store: Store, files: Resource, tmp_path: Path
) -> None:
    plan = start_plan(
        sqlite_store,
        action(files.resource_id),
        profile_override="trusted",
        options=RunOptions(sandbox_base=tmp_path / "sandboxes"),
    )
    assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
    with sqlite_store.unit_of_work() as uow:
        [pending] = uow.approvals.pending(plan.plan_id)
        assert uow.corrections.for_plan(plan.plan_id) == []
    assert "Revise the strategy?" in pending.question and REASON in pending.question
