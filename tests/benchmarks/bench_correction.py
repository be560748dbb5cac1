"""Correcting the last of 50 Execute decisions vs re-running the whole plan.

A scripted plan makes 50 Execute decisions, each writing one file into a directory sandbox
(filesystem_copy). Baseline: running the plan from the start to its Apply gate. Measured:
reverting the last decision with guidance (preview + rollback + reasoning fork + replay),
as wall time and as tool calls replayed.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.benchmarks.harness import Measurement

STEPS = 50


def _action(resource: str, steps: int) -> Action:
    decisions: list[dict[str, Any]] = [
        {
            "key": "strategy",
            "type": "strategy_choice",
            "question": "How?",
            "alternatives": [{"option": "one file per step"}],
        }
    ]
    for i in range(steps):
        decisions.append(
            {
                "key": f"step-{i}",
                "type": "implementation_choice",
                "question": f"Write part {i}?",
                "parent": "strategy",
                "alternatives": [
                    {
                        "option": f"part {i} plain",
                        "match": ["plain"],
                        "tool_calls": [
                            {
                                "tool": "local/write-file",
                                "arguments": {
                                    "resource": resource,
                                    "path": f"parts/{i}.txt",
                                    "content": f"part {i}\n",
                                },
                            }
                        ],
                    },
                    {
                        "option": f"part {i} loud",
                        "match": ["loud"],
                        "tool_calls": [
                            {
                                "tool": "local/write-file",
                                "arguments": {
                                    "resource": resource,
                                    "path": f"parts/{i}.txt",
                                    "content": f"PART {i}!\n",
                                },
                            }
                        ],
                    },
                ],
            }
        )
    return Action.model_validate(
        {
            "name": "bench/fifty",
            "prompt": "write fifty parts",
            "resources": [resource],
            "decisions": decisions,
        }
    )


def _calls(store: Store, plan_id: str) -> int:
    with store.unit_of_work() as uow:
        return sum(
            len(uow.tool_invocations.for_decision(d.decision_id))
            for d in uow.decisions.for_plan(plan_id)
        )


def run(quick: bool) -> list[Measurement]:
    steps = 10 if quick else STEPS
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "files").mkdir()
        store = Store.open(str(base / "agents.db"))
        resource = Resource(
            resource_id="bench/files",
            kind="filesystem",
            location=str(base / "files"),
            sandbox_strategy="filesystem_copy",
            checkpoint_max_per_plan=200,
        )
        with store.unit_of_work(write=True) as uow:
            uow.resources.add(resource)
            uow.commit()
        options = RunOptions(sandbox_base=base / "sandboxes")
        start = time.perf_counter()
        plan = start_plan(
            store, _action(resource.resource_id, steps), profile_override="auto", options=options
        )
        whole = time.perf_counter() - start
        calls_before = _calls(store, plan.plan_id)
        with store.unit_of_work() as uow:
            wanted = f"step-{steps - 1}"
            last = next(d for d in uow.decisions.for_plan(plan.plan_id) if d.step_key == wanted)
        start = time.perf_counter()
        impact = preview(store, last.decision_id, CorrectionMode.REVERT, "make it loud")
        execute(store, impact, acknowledged=True, requested_by="bench", options=options)
        correcting = time.perf_counter() - start
        replayed = _calls(store, plan.plan_id) - calls_before
        store.close()
    return [
        Measurement(
            "correction",
            f"revert the last of {steps} Execute decisions",
            correcting,
            "re-running the whole plan",
            whole,
            "≤ 0.10× baseline",
            correcting <= 0.10 * whole,
        ),
        Measurement(
            "correction",
            f"tool calls replayed ({replayed} of {calls_before})",
            float(replayed),
            "tool calls of the whole plan",
            float(calls_before),
            "≤ 0.10× baseline",
            replayed <= 0.10 * calls_before,
        ),
    ]
