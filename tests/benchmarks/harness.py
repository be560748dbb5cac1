"""A tiny benchmark harness: best-of-N timings, each reported as a ratio to a baseline
measured in the same run (so figures compare across machines). No assertions: speed goals
are reported against their targets in docs/benchmarks.md, never failed in the test suite.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Measurement:
    """One figure: ``seconds`` for ``name`` against ``baseline_seconds`` for ``baseline``.

    ``target`` states the goal in words (for example "≤ 0.8× baseline");
    ``met`` says whether this run met it (None when there is no goal), judged on ``seconds``.
    """

    group: str
    name: str
    seconds: float
    baseline: str
    baseline_seconds: float
    target: str
    met: bool | None
    # Where ``seconds`` are minimums, the medians of the same runs (noise shows in the gap).
    median: float | None = None
    baseline_median: float | None = None
    # What ``seconds`` and ``baseline_seconds`` count when not seconds (e.g. "KiB" stored).
    unit: str = "s"

    @property
    def ratio(self) -> float:
        return self.seconds / self.baseline_seconds if self.baseline_seconds else float("inf")


def best_of(
    action: Callable[[], object], repeat: int = 5, setup: Callable[[], object] | None = None
) -> float:
    """The fastest of ``repeat`` runs of ``action`` (each after ``setup``, which is not timed)."""
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def min_and_median(action: Callable[[], object], repeat: int = 5) -> tuple[float, float]:
    """The fastest and the median of ``repeat`` runs of ``action``."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def median_of(
    action: Callable[[], object], repeat: int = 5, setup: Callable[[], object] | None = None
) -> float:
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
