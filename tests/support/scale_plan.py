"""A correctable plan of any size for scale tests and benchmarks (issue 22).

A scripted action run to its Apply gate with a directory sandbox (``filesystem_copy``) and an
external ``none`` resource; then, under its first Execute decision, a random recursive tree of
Execute decisions with one influence edge each (as bench_impact's plan), each with one
recorded tool call — every tenth on the ``none`` resource, every twentieth irreversible — so
that every part of a correction's preview has rows to read. Bulk rows go in with SQLAlchemy
Core (executemany) in one transaction.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus, Phase
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.impact import InfluenceGraph
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.model import Impact
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.tables import (
    CheckpointGroupRow,
    CheckpointMetadataRow,
    DecisionDependencyRow,
    DecisionRow,
    ToolInvocationRow,
)
from cleveragents_tui.store.unit_of_work import UnitOfWork

FILES = "bench/files"
API = "bench/api"
STEPS = 4


def _action() -> Action:
    decisions: list[dict[str, Any]] = [
        {
            "key": "strategy",
            "type": "strategy_choice",
            "question": "How?",
            "alternatives": [{"option": "one file per step"}],
        }
    ]
    for i in range(STEPS):
        content = {"plain": f"part {i}\n", "loud": f"PART {i}!\n"}
        decisions.append(
            {
                "key": f"step-{i}",
                "type": "implementation_choice",
                "question": f"Write part {i}?",
                "parent": "strategy",
                "alternatives": [
                    {
                        "option": f"part {i} {tone}",
                        "match": [tone],
                        "tool_calls": [
                            {
                                "tool": "local/write-file",
                                "arguments": {
                                    "resource": FILES,
                                    "path": f"parts/{i}.txt",
                                    "content": text,
                                },
                            }
                        ],
                    }
                    for tone, text in content.items()
                ],
            }
        )
    return Action.model_validate(
        {
            "name": "bench/scale",
            "prompt": "write the parts",
            "resources": [FILES, API],
            "decisions": decisions,
        }
    )


@dataclass(frozen=True)
class ScalePlan:
    store: Store
    plan_id: str
    ids: list[str]  # the bulk decisions; ids[0] is the plan's first Execute decision
    options: RunOptions


def build(base: Path, count: int, url: str | None = None, seed: int = 11) -> ScalePlan:
    """The plan of ``count`` decisions described above, its files and sandboxes in ``base``,
    in the database at ``url`` (default: a SQLite file in ``base``; the resources are
    registered there once)."""
    (base / "files").mkdir(parents=True)
    store = Store.open(url or str(base / "agents.db"))
    with store.unit_of_work(write=True) as uow:
        if not any(r.resource_id == FILES for r in uow.resources.all()):
            _register(uow, base)
        uow.commit()
    options = RunOptions(sandbox_base=base / "sandboxes")
    plan = start_plan(store, _action(), profile_override="auto", options=options)
    with store.unit_of_work() as uow:
        made = uow.decisions.for_plan(plan.plan_id)
    first = next(d for d in made if d.phase is Phase.EXECUTE)
    top = max(d.sequence_number for d in made)
    rng = random.Random(seed)
    extra = count - len(made)
    ids = [first.decision_id, *(new_ulid() for _ in range(extra))]
    parents: list[int | None] = [None, *(rng.randrange(n) for n in range(1, len(ids)))]
    now = datetime.now(UTC)
    decisions = [
        {
            "decision_id": ids[n],
            "plan_id": plan.plan_id,
            "parent_decision_id": ids[parent],
            "sequence_number": top + n,
            "decision_type": "implementation_choice",
            "phase": "execute",
            "question": f"question {n}",
            "chosen_option": f"option {n}",
            "alternatives_considered": "[]",
            "relevant_resources": "[]",
            "created_at": now,
            "is_correction": False,
        }
        for n, parent in enumerate(parents)
        if parent is not None
    ]
    edges = [
        {
            "upstream_decision_id": ids[upstream],
            "downstream_ref": ids[n],
            "dependency_type": "decision",
        }
        for n in range(2, len(ids))
        if (upstream := rng.randrange(n)) != parents[n]
    ]
    calls = [
        {
            "invocation_id": new_ulid(),
            "plan_id": plan.plan_id,
            "decision_id": ids[n],
            "tool": "local/notify" if n % 20 == 0 else "local/call",
            "arguments": f'{{"resource": "{API if n % 10 == 0 else FILES}"}}',
            "side_effects": '["sends a message"]' if n % 20 == 0 else "[]",
            "irreversible": n % 20 == 0,
            "created_at": now,
            "ok": True,
            "output": "",
        }
        for n in range(1, len(ids))
    ]
    with store.engine.begin() as connection:
        for rows, table in (
            (decisions, DecisionRow),
            (edges, DecisionDependencyRow),
            (calls, ToolInvocationRow),
        ):
            for start in range(0, len(rows), 5000):
                connection.execute(insert(table), rows[start : start + 5000])
    return ScalePlan(store, plan.plan_id, ids, options)


def add_pruned_groups(scale: ScalePlan, keep: set[str]) -> None:
    """A checkpoint group of the plan's directory sandbox at every bulk decision but those
    of ``keep``, each pruned by the budget, recorded after the plan's own: the rows a plan
    of that many Execute decisions holds (a group at each; the budget prunes the old ones,
    their rows stay), which the plan above lacks."""
    later = datetime.now(UTC) + timedelta(days=1)
    groups, rows = [], []
    for n, decision_id in enumerate(d for d in scale.ids if d not in keep):
        at = later + timedelta(seconds=n)
        group_id = new_ulid()
        groups.append(
            {
                "group_id": group_id,
                "plan_id": scale.plan_id,
                "decision_id": decision_id,
                "status": "committed",
                "created_at": at,
                "pending_refs": "[]",
            }
        )
        rows.append(
            {
                "checkpoint_id": new_ulid(),
                "plan_id": scale.plan_id,
                "group_id": group_id,
                "decision_id": decision_id,
                "resource_id": FILES,
                "checkpoint_type": "decision_point",
                "strategy": "filesystem_copy",
                "ref": f"pruned-{n}",
                "created_at": at,
                "pruned_at": at,
            }
        )
    with scale.store.engine.begin() as connection:
        connection.execute(insert(CheckpointGroupRow), groups)
        connection.execute(insert(CheckpointMetadataRow), rows)


def revert_preview(scale: ScalePlan, decision_id: str) -> Impact:
    """The preview of reverting ``decision_id`` with the guidance the action's steps take."""
    return preview(
        scale.store,
        decision_id,
        CorrectionMode.REVERT,
        "make it loud",
        sandbox_base=scale.options.sandbox_base,
    )


def correct_another(scale: ScalePlan) -> None:
    """A small plan of the same action started in the same store and its first Execute
    decision reverted: afterwards the statements a correction sends are compiled and kept
    by the store's engine, as in the app's process after its first correction (a command
    in a new process compiles them for itself)."""
    options = RunOptions(sandbox_base=scale.options.sandbox_base)
    plan = start_plan(scale.store, _action(), profile_override="auto", options=options)
    with scale.store.unit_of_work() as uow:
        made = uow.decisions.for_plan(plan.plan_id)
    first = next(d for d in made if d.phase is Phase.EXECUTE)
    impact = revert_preview(scale, first.decision_id)
    result = execute(
        scale.store, impact, acknowledged=True, requested_by="warm-up", options=options
    )
    if result.correction.status is not CorrectionStatus.SUCCEEDED:
        raise AssertionError(f"the warm-up correction {result.correction.status.value}")


def _register(uow: UnitOfWork, base: Path) -> None:
    uow.resources.add(
        Resource(
            resource_id=FILES,
            kind="filesystem",
            location=str(base / "files"),
            sandbox_strategy="filesystem_copy",
        )
    )
    uow.resources.add(
        Resource(
            resource_id=API,
            kind="external",
            location=str(base / "outbox"),
            sandbox_strategy="none",
        )
    )


def target_near(scale: ScalePlan, share: float, seed: int = 5) -> tuple[str, int]:
    """A bulk decision whose affected subtree is closest to ``share`` of the plan."""
    if share >= 1.0:
        return scale.ids[0], len(scale.ids)
    graph = InfluenceGraph.load(scale.store, scale.plan_id)
    wanted = share * len(scale.ids)
    best: tuple[float, str, int] | None = None
    for decision_id in random.Random(seed).sample(scale.ids[1:1000], min(200, len(scale.ids) - 1)):
        size = len(graph.affected(decision_id).decisions)
        if best is None or abs(size - wanted) < best[0]:
            best = (abs(size - wanted), decision_id, size)
    assert best is not None
    return best[1], best[2]
