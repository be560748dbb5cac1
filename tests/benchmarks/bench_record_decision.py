"""record_decision overhead on the demo: the time spent recording an Execute decision
(context snapshot + checkpoint group + store) as a share of that step's total time (the
step also decides, runs the decision's tool calls, and records them)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.engine import runner as runner_module
from cleveragents_tui.engine.actions import load_action
from cleveragents_tui.engine.demo import build_demo
from cleveragents_tui.engine.runner import PlanRunner, RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.benchmarks.harness import Measurement


def _run_once(base: Path) -> tuple[float, float, int]:
    store = Store.open(str(base / "agents.db"))
    demo = build_demo(store, base / "demo")
    recording = 0.0
    stepping = 0.0
    steps = 0
    original_record = runner_module.record_decision
    original_step = PlanRunner._step

    def timed_record(*args: Any, **kwargs: Any) -> Any:
        nonlocal recording
        start = time.perf_counter()
        try:
            return original_record(*args, **kwargs)
        finally:
            if kwargs.get("phase") is Phase.EXECUTE:
                recording += time.perf_counter() - start

    def timed_step(
        self: PlanRunner, reasoner: Any, executor: Any, phase: Phase, state: Any, ref: Any
    ) -> Any:
        nonlocal stepping, steps
        start = time.perf_counter()
        try:
            return original_step(self, reasoner, executor, phase, state, ref)
        finally:
            if phase is Phase.EXECUTE:
                stepping += time.perf_counter() - start
                steps += 1

    runner_module.record_decision = timed_record  # type: ignore[assignment]
    PlanRunner._step = timed_step  # type: ignore[method-assign]
    try:
        start_plan(
            store,
            load_action(str(demo.action_file)),
            profile_override="auto",
            options=RunOptions(sandbox_base=base / "sandboxes"),
        )
    finally:
        runner_module.record_decision = original_record
        PlanRunner._step = original_step  # type: ignore[method-assign]
        store.close()
    return recording, stepping, steps


def run(quick: bool) -> list[Measurement]:
    repeats = 2 if quick else 5
    best: tuple[float, float, int] | None = None
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            result = _run_once(Path(tmp))
        if best is None or result[1] < best[1]:
            best = result
    assert best is not None
    recording, stepping, steps = best
    return [
        Measurement(
            "record_decision",
            f"recording {steps} Execute decisions (demo)",
            recording,
            "whole Execute steps",
            stepping,
            "share of the step (informational)",
            None,
        ),
    ]
