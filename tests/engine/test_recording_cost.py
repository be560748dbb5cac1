"""Recording an Execute decision with fewer commits and reads that do not grow with the
plan (issue 22), and the crash guarantees kept while doing so.

The pending group is now inserted by the commit that notes its first checkpoint (not on
its own, empty, before it), a decision that modified nothing gets its group committed in
the one transaction that stores it, and ``PlanSandboxes.modified`` reads only the writes
stored since its last call.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import event

from cleveragents_tui.actors.base import Proposal, ToolCallRequest
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.engine.core.checkpoints import store_execute_decision
from cleveragents_tui.engine.core.recorder import record_decision
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.ops.doctor import run_checks
from cleveragents_tui.engine.ops.recovery import recover_pending_groups
from cleveragents_tui.failpoints import ENV_VAR
from tests.engine.conftest import FILES, FILES_BUDGET, GIT, World
from tests.engine.test_recovery import CRASHING_RECORD
from tests.support.scale_plan import API, build
from tests.support.scale_plan import FILES as SCALE_FILES
from tests.support.store_rows import plan_groups


def _crash_recording(world: World, failpoint: str, *, write: bool = True) -> None:
    script = CRASHING_RECORD
    if not write:  # the same recording of a decision that modified nothing
        script = script.replace('(workdir / "docs" / "guide.md")', "(workdir / 'unused')")
        script = script.replace('sandboxes.note_write("local/files")', "")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(world.store.engine.url.database),
            world.plan.plan_id,
            world.root.decision_id,
            str(world.base),
        ],
        env={**os.environ, ENV_VAR: f"{failpoint}=kill"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == -signal.SIGKILL, result.stdout + result.stderr


def test_a_crash_once_the_first_checkpoint_is_noted_leaves_it_to_recovery(world: World) -> None:
    _crash_recording(world, "checkpoint.group_pending")

    with world.store.unit_of_work() as uow:
        [(group, refs)] = uow.checkpoints.pending_groups()
    assert [resource for resource, _ in refs] == [FILES]
    [recovered] = recover_pending_groups(world.store, world.base)
    assert recovered.group_id == group.group_id
    assert len(recovered.dropped) == 1 and recovered.left == ()
    assert run_checks(world.store, world.base).problems == []


def test_a_crash_recording_a_decision_that_modified_nothing_leaves_nothing(
    world: World,
) -> None:
    _crash_recording(world, "checkpoint.before_commit", write=False)

    with world.store.unit_of_work() as uow:
        assert uow.checkpoints.pending_groups() == []  # no group was committed empty first
        assert uow.decisions.next_sequence_number(world.plan.plan_id) == 1
    assert run_checks(world.store, world.base).problems == []


def test_a_decision_that_modified_nothing_still_gets_its_committed_group(world: World) -> None:
    decision = world.decision("only thought about it")

    group = store_execute_decision(world.sandboxes, decision)

    with world.store.unit_of_work() as uow:
        [stored] = plan_groups(world.store, world.plan.plan_id)
        assert uow.checkpoints.for_decision(decision.decision_id) == []
    assert (stored.group_id, stored.decision_id, stored.status) == (
        group.group_id,
        decision.decision_id,
        "committed",
    )
    assert run_checks(world.store, world.base).problems == []


def test_a_write_stored_by_another_process_joins_the_next_group(world: World) -> None:
    """modified() reads only the writes stored since its last call: one stored by another
    process (another PlanSandboxes) after this one's first recording still counts."""
    world.write_file(GIT, "src/app.py", "v2\n")
    first = world.decision("before the other process wrote")
    store_execute_decision(world.sandboxes, first)
    other = PlanSandboxes(world.store, world.plan.plan_id, world.base)
    elsewhere = other.get(FILES).workdir
    assert elsewhere is not None
    (elsewhere / "docs" / "guide.md").write_text("written elsewhere\n")
    other.note_write(FILES)

    second = world.decision("after it")
    store_execute_decision(world.sandboxes, second)

    with world.store.unit_of_work() as uow:
        before = uow.checkpoints.for_decision(first.decision_id)
        after = uow.checkpoints.for_decision(second.decision_id)
    assert [c.resource_id for c in before] == [GIT]
    assert [c.resource_id for c in after] == [FILES, GIT]


def _query_plans(store: object, statements: list[tuple[str, object]]) -> list[str]:
    plans = []
    with store.engine.connect() as connection:  # type: ignore[attr-defined]
        for sql, params in statements:
            rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}", params)
            plans += [str(row[-1]) for row in rows]
    return plans


def test_recording_reads_only_through_indexes(tmp_path: Path) -> None:
    """Every read of a recording (after a runner's first, which reads what the plan wrote
    before it) starts from an index, so none grows with the plan: no full scan of the
    plan's decisions, checkpoints or events, on a plan whose directory sandbox is past its
    checkpoint budget."""
    scale = build(tmp_path, 200)
    sandboxes = PlanSandboxes(scale.store, scale.plan_id, scale.options.sandbox_base)
    reads: list[tuple[str, object]] = []

    def record(n: int) -> None:
        record_decision(
            scale.store,
            sandboxes,
            plan_id=scale.plan_id,
            phase=Phase.EXECUTE,
            proposal=Proposal(
                key=f"k{n}",
                decision_type=DecisionType.IMPLEMENTATION_CHOICE,
                question=f"step {n}?",
                chosen_option=f"option {n}",
                tool_calls=(ToolCallRequest("local/call", {"resource": API}),),
            ),
            parent_id=scale.ids[-1],
            depends_on=(scale.ids[-2],),
            actor_ref=None,
            context={"n": n},
        )

    for n in range(3):
        record(n)
    with scale.store.unit_of_work(write=True) as uow:
        uow.resources.set_checkpoints(SCALE_FILES, max_per_plan=2)
        uow.commit()
    sandboxes = PlanSandboxes(scale.store, scale.plan_id, scale.options.sandbox_base)
    record(3)  # the runner's first recording

    def capture(*args: Any) -> None:
        if args[2].lstrip().upper().startswith("SELECT"):
            reads.append((args[2], args[3]))

    event.listen(scale.store.engine, "before_cursor_execute", capture)
    try:
        record(4)
    finally:
        event.remove(scale.store.engine, "before_cursor_execute", capture)
        plans = _query_plans(scale.store, reads)
        scale.store.close()
    assert any("ix_checkpoint_metadata_live" in p for p in plans), plans  # pruned: read live
    # no table scanned (the sequence number and the parent's plan are read as two scalar
    # subqueries of one statement: SQLite reports their one constant row as a "scan")
    assert not [p for p in plans if p.startswith("SCAN") and p != "SCAN CONSTANT ROW"], plans
    # a plan's checkpoints or events: never all of them (a search on the plan alone)
    assert not [
        p for p in plans if p.endswith("(plan_id=?)") and ("checkpoint" in p or "events" in p)
    ], plans


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"question": "  "}, "question"),
        ({"confidence": 1.5}, "confidence_score"),
        (
            {"tool_calls": (ToolCallRequest("local/call", {"resource": "no-namespace"}),)},
            "resource_id",
        ),
    ],
)
def test_an_invalid_proposal_is_refused_and_nothing_is_recorded(
    world: World, change: dict[str, Any], field: str
) -> None:
    """The actor's proposal is a trust boundary: the decision is validated as one model (its
    context snapshot and resource refs within it) before anything is checkpointed or stored."""
    world.write_file(FILES, "a.txt", "a")
    fields: dict[str, Any] = {"question": "what next?", "chosen_option": "this", **change}
    proposal = Proposal(key="bad", decision_type=DecisionType.IMPLEMENTATION_CHOICE, **fields)
    with pytest.raises(ValidationError, match=field):
        record_decision(
            world.store,
            world.sandboxes,
            plan_id=world.plan.plan_id,
            phase=Phase.EXECUTE,
            proposal=proposal,
            parent_id=world.root.decision_id,
            depends_on=(),
            actor_ref=None,
            context={"n": 1},
        )
    with world.store.unit_of_work() as uow:
        assert [d.decision_id for d in uow.decisions.for_plan(world.plan.plan_id)] == [
            world.root.decision_id
        ]
        assert plan_groups(world.store, world.plan.plan_id) == []


def _counting_the_budget(world: World) -> list[int]:
    """Per recording (append a 0 before each): the budget's COUNT statements heard."""
    heard: list[int] = []

    def capture(*args: Any) -> None:
        if "count(" in args[2]:
            heard[-1] += 1

    event.listen(world.store.engine, "before_cursor_execute", capture)
    return heard


def test_the_budget_is_counted_only_when_a_recording_could_exceed_it(world: World) -> None:
    """A recording's COUNT of live checkpoints is left out while the count this recorder
    made at the plan's previous decision leaves room for one more: the budget still holds."""
    heard = _counting_the_budget(world)
    for i in range(FILES_BUDGET + 2):
        world.write_file(FILES, "docs/guide.md", f"guide v{i}\n")
        heard.append(0)
        store_execute_decision(world.sandboxes, world.decision(f"step {i}"))

    # the baseline and the first decision's: 2 live, room for 4 more without a count;
    # then each recording could exceed the budget: counted (and pruned)
    assert heard == [1, 0, 0, 0, 0, 1, 1, 1]
    with world.store.unit_of_work() as uow:
        rows = uow.checkpoints.for_plan(world.plan.plan_id, FILES)
    assert len([r for r in rows if r.pruned_at is None]) == FILES_BUDGET
    assert run_checks(world.store, world.base).problems == []


def test_a_checkpoint_made_elsewhere_makes_the_next_recording_count(world: World) -> None:
    """Another recorder's decision in the plan, or a checkpoint before a write, adds live
    checkpoints this recorder did not count: its next recording counts again."""
    from cleveragents_tui.engine.core.checkpoints import pre_write_checkpoint

    other = PlanSandboxes(world.store, world.plan.plan_id, world.base)
    heard = _counting_the_budget(world)
    steps: list[Callable[[], object]] = [
        lambda: store_execute_decision(world.sandboxes, world.decision("ours")),
        lambda: store_execute_decision(other, world.decision("another recorder's")),
        lambda: store_execute_decision(world.sandboxes, world.decision("ours again")),
        lambda: store_execute_decision(world.sandboxes, world.decision("room for it")),
        lambda: pre_write_checkpoint(world.sandboxes, FILES),
        lambda: store_execute_decision(world.sandboxes, world.decision("after a pre-write")),
    ]
    for i, step in enumerate(steps):
        world.write_file(FILES, "docs/guide.md", f"guide v{i}\n")
        heard.append(0)
        step()

    # live: the baseline, then 2 (room for 4), 3 (the other's), 4 (counted: room for 2), 5
    # (not counted), 6 (the pre-write's own count), 7: counted, so pruned to the budget
    assert heard == [1, 1, 1, 0, 1, 1]
    with world.store.unit_of_work() as uow:
        rows = uow.checkpoints.for_plan(world.plan.plan_id, FILES)
    assert len([r for r in rows if r.pruned_at is None]) == FILES_BUDGET
