"""What a user waits for when correcting a large plan: the full ``preview(REVERT)`` and its
``execute`` (the revert without the replay), at 10,000 decisions (targets affecting ~40% and
~100%) and at 100,000 (~4.5%), in a SQLite file.

The plan is real (tests/support/scale_plan.py): a scripted action run to its Apply gate with
a directory sandbox and a ``none`` resource, then a random recursive tree of Execute
decisions with influence edges and one tool call each, so every part of the preview has
rows to read.

Baseline, measured in the same run: one plain recursive CTE over the same plan from the same
target (bench_impact's, on the driver's cursor) — the least a one-off question about the
affected subtree can cost. Goals (issue 22): preview ≤ 2× the CTE; execute ≤ 5×.

``execute`` is timed without the replay: the replay (PlanRunner.run, which re-makes the
action's steps) is timed on its own in the same call and subtracted. Each execute gets a
freshly built plan (it changes the plan), the CTE is timed on that plan just before.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.engine.correction import Impact, execute, preview
from cleveragents_tui.engine.runner import PlanRunner
from tests.benchmarks.bench_impact import plain_cte
from tests.benchmarks.harness import Measurement
from tests.support.scale_plan import ScalePlan, build, target_near

GROUP = "correction at scale"


def _preview(scale: ScalePlan, target: str) -> Impact:
    return preview(
        scale.store,
        target,
        CorrectionMode.REVERT,
        "make it loud",
        sandbox_base=scale.options.sandbox_base,
    )


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def execute_without_replay(scale: ScalePlan, impact: Impact) -> float:
    """The time of ``execute`` less that of its replay (PlanRunner.run, timed inside it)."""
    replaying = 0.0
    original = PlanRunner.run

    def timed_run(self: PlanRunner) -> Any:
        nonlocal replaying
        start = time.perf_counter()
        try:
            return original(self)
        finally:
            replaying += time.perf_counter() - start

    PlanRunner.run = timed_run  # type: ignore[method-assign]
    try:
        whole = _timed(
            lambda: execute(
                scale.store,
                impact,
                acknowledged=True,
                requested_by="bench",
                options=scale.options,
            )
        )
    finally:
        PlanRunner.run = original  # type: ignore[method-assign]
    if replaying == 0.0:
        raise AssertionError("the replay was not timed")
    return whole - replaying


CASES = ((10_000, 0.40), (10_000, 1.0), (100_000, 0.045))


@dataclass(frozen=True)
class _Once:
    label: str
    cte: float
    preview: float
    execute: float


def _measure_once(count: int, share: float) -> _Once:
    """One plan built, its CTE and preview timed in turn (best of 3), then one execute."""
    with tempfile.TemporaryDirectory() as tmp:
        scale = build(Path(tmp), count)
        try:
            target, size = target_near(scale, share)
            cte, seen = float("inf"), float("inf")
            for _ in range(3):
                cte = min(cte, _timed(lambda: plain_cte(scale.store, target)))
                seen = min(seen, _timed(lambda: _preview(scale, target)))
            done = execute_without_replay(scale, _preview(scale, target))
        finally:
            scale.store.close()
    label = f"{count:,} decisions, {size:,} affected ({size / count:.0%})"
    return _Once(label, cte, seen, done)


def run(quick: bool) -> list[Measurement]:
    repeat = 1 if quick else 2
    cases = ((1_000, 0.40), (1_000, 1.0), (10_000, 0.045)) if quick else CASES
    results: list[Measurement] = []
    for count, share in cases:
        runs = [_measure_once(count, share) for _ in range(repeat)]
        best = min(runs, key=lambda r: r.preview / r.cte)
        results.append(
            Measurement(
                GROUP, f"preview(REVERT) ({best.label})", best.preview,
                "one plain recursive CTE", best.cte, "≤ 2×", best.preview <= 2 * best.cte,
            )
        )  # fmt: skip
        best = min(runs, key=lambda r: r.execute / r.cte)
        results.append(
            Measurement(
                GROUP, f"execute without the replay ({best.label})", best.execute,
                "one plain recursive CTE", best.cte, "≤ 5×", best.execute <= 5 * best.cte,
            )
        )  # fmt: skip
    return results
