"""record_decision's cost: on the demo, as a share of a scripted Execute step; and at scale,
flat in plan size (issue 22).

*Demo*: the time spent recording an Execute decision (context snapshot + checkpoint group +
store) as a share of that step's total time (the step also decides, runs the decision's
tool calls, and records them).

*At scale*: one Execute decision recorded in a plan of 100, 10,000 and 100,000 decisions
(tests/support/scale_plan.py; 100,000 only with ``AGENTS_BENCH_100K=1``, outside CI), with
its checkpoint group over the plan's directory sandbox, an influence edge and a tool call
naming the ``none`` resource. Floor, in the same run: the rows that recording inserted,
inserted again (fresh keys) in ONE transaction on the driver's connection — what storing
them costs at the least. Goal: ≤ 3× the floor, and no growth with the plan's size.
"""

from __future__ import annotations

import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event

from cleveragents_tui.actors.base import Proposal, ToolCallRequest
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.engine.core.recorder import record_decision
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.run import steps as steps_module
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.benchmarks.harness import Measurement
from tests.support.scale_plan import API, build

GROUP = "record_decision"
KEYED = tuple(
    f"INSERT INTO {t} "
    for t in ("decisions", "checkpoint_groups", "checkpoint_metadata", "context_blobs")
)
ULID_OR_HASH = re.compile(r"^(?:[0-9A-HJKMNP-TV-Z]{26}|[0-9a-f]{64})$")


def _run_once(base: Path) -> tuple[float, float, int]:
    store = Store.open(str(base / "agents.db"))
    demo = build_demo(store, base / "demo")
    recording = 0.0
    stepping = 0.0
    steps = 0
    original_record = record_decision
    original_step = steps_module.step

    def timed_record(*args: Any, **kwargs: Any) -> Any:
        nonlocal recording
        start = time.perf_counter()
        try:
            return original_record(*args, **kwargs)
        finally:
            if kwargs.get("phase") is Phase.EXECUTE:
                recording += time.perf_counter() - start

    def timed_step(
        runner: PlanRunner, reasoner: Any, executor: Any, phase: Phase, state: Any, ref: Any
    ) -> Any:
        nonlocal stepping, steps
        start = time.perf_counter()
        try:
            return original_step(runner, reasoner, executor, phase, state, ref)
        finally:
            if phase is Phase.EXECUTE:
                stepping += time.perf_counter() - start
                steps += 1

    vars(steps_module)["record_decision"] = timed_record  # the step's own name for it
    vars(steps_module)["step"] = timed_step
    try:
        start_plan(
            store,
            load_action(str(demo.action_file)),
            profile_override="auto",
            options=RunOptions(sandbox_base=base / "sandboxes"),
        )
    finally:
        vars(steps_module)["record_decision"] = original_record
        vars(steps_module)["step"] = original_step
        store.close()
    return recording, stepping, steps


def _demo(quick: bool) -> Measurement:
    best: tuple[float, float, int] | None = None
    for _ in range(2 if quick else 5):
        with tempfile.TemporaryDirectory() as tmp:
            result = _run_once(Path(tmp))
        if best is None or result[1] < best[1]:
            best = result
    assert best is not None
    recording, stepping, steps = best
    return Measurement(
        GROUP,
        f"recording {steps} Execute decisions (demo)",
        recording,
        "whole Execute steps",
        stepping,
        "share of the step (informational)",
        None,
    )


Insert = tuple[str, tuple[Any, ...]]


def _fresh(inserts: list[Insert], top: int) -> list[Insert]:
    """The same INSERTs with every key this recording made replaced by a fresh one (the
    first column of the tables keyed by it, the sequence number), so they can go in again."""
    made = {params[0] for sql, params in inserts if sql.startswith(KEYED) and params}
    renamed: dict[Any, Any] = {
        key: (new_ulid() if len(key) == 26 else os.urandom(32).hex())
        for key in made
        if ULID_OR_HASH.match(key)
    }
    fresh = []
    for sql, params in inserts:
        values = tuple(renamed.get(v, v) if isinstance(v, str) else v for v in params)
        if sql.startswith("INSERT INTO decisions "):
            values = tuple(top if v == top - 1 else v for v in values)  # the next sequence
        fresh.append((sql, values))
    return fresh


def _floor(store: Store, inserts: list[Insert]) -> float:
    """One transaction of these INSERTs on the driver's connection, timed BEGIN to COMMIT."""
    with store.engine.connect() as connection:
        raw = connection.connection.driver_connection
        assert raw is not None
        start = time.perf_counter()
        cursor = raw.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        for sql, params in inserts:
            cursor.execute(sql, params)
        cursor.execute("COMMIT")
        elapsed = time.perf_counter() - start
        cursor.close()
    return elapsed


def _at_scale(count: int, repeat: int) -> tuple[list[float], list[float]]:
    """(record_decision times, floor times) in a plan of ``count`` decisions."""
    recorded: list[float] = []
    floors: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        scale = build(Path(tmp), count)
        store = scale.store
        sandboxes = PlanSandboxes(store, scale.plan_id, scale.options.sandbox_base)
        inserts: list[Insert] = []

        def capture(_c: Any, _cur: Any, sql: str, params: Any, _ctx: Any, many: bool) -> None:
            if sql.startswith("INSERT") and not many:
                inserts.append((sql, tuple(params)))

        try:
            for n in range(repeat):
                proposal = Proposal(
                    key=f"bench-{n}",
                    decision_type=DecisionType.IMPLEMENTATION_CHOICE,
                    question=f"bench question {n}",
                    chosen_option=f"bench option {n}",
                    tool_calls=(ToolCallRequest("local/call", {"resource": API}),),
                )
                inserts.clear()
                event.listen(store.engine, "before_cursor_execute", capture)
                start = time.perf_counter()
                made = record_decision(
                    store,
                    sandboxes,
                    plan_id=scale.plan_id,
                    phase=Phase.EXECUTE,
                    proposal=proposal,
                    parent_id=scale.ids[-1],
                    depends_on=(scale.ids[-2],),
                    actor_ref=None,
                    context={"bench": n, "plan": scale.plan_id},
                )
                recorded.append(time.perf_counter() - start)
                event.remove(store.engine, "before_cursor_execute", capture)
                floors.append(_floor(store, _fresh(inserts, made.sequence_number + 1)))
        finally:
            store.close()
    return recorded, floors


def run(quick: bool) -> list[Measurement]:
    results = [_demo(quick)]
    counts = [100, 10_000]
    if os.environ.get("AGENTS_BENCH_100K") == "1":
        counts.append(100_000)
    repeat = 5 if quick else 11
    for count in counts:
        recorded, floors = _at_scale(count, repeat)
        for how, pick in (("minimums", min), ("medians", statistics.median)):
            seconds, floor = pick(recorded), pick(floors)
            results.append(
                Measurement(
                    GROUP, f"one Execute decision in a plan of {count:,} decisions, {how}",
                    seconds, "its rows inserted in one transaction", floor, "≤ 3×",
                    seconds <= 3 * floor,
                )
            )  # fmt: skip
    return results
