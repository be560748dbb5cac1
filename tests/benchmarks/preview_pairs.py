"""The correction preview against its CTE, many pairs turn about (issue 22): the preview-only
runs of docs/benchmarks.md's issue-22 section. bench_correction_scale times a few previews
per plan beside execute; at a small affected set the preview and the CTE take a fraction of
a millisecond, so their minimums want many pairs.

``python -m tests.benchmarks.preview_pairs BACKEND SIZES SHARES PAIRS OUT.json`` — BACKEND
``sqlite`` (a file) or ``pg`` (a throwaway server, tests/support/postgres.py); SIZES and
SHARES comma-separated (``1000,10000`` and ``0.005,0.05``); PAIRS CTE / cold-preview pairs
per target below 30% affected (a quarter, at least 3, above), then as many with the app's
warm graph open. One plan per size, its targets as bench_correction_scale picks them. Run it
with ``PYTHONPATH`` at the tree to measure: it uses only what main had before this file.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from tests.benchmarks.bench_correction_scale import plain_cte
from tests.support.postgres import PostgresServer, find_bindir
from tests.support.scale_plan import ScalePlan, build, revert_preview, target_near


def _pairs(scale: ScalePlan, target: str, count: int, warm: bool) -> dict[str, list[float]]:
    if warm:
        OPEN_GRAPHS.open(scale.store, scale.plan_id)
    try:
        for _ in range(3):  # warm-up: compiled statements, page cache, kept reads
            plain_cte(scale.store, target)
            revert_preview(scale, target)
        found: dict[str, list[float]] = {"cte": [], "preview": [], "cpu": []}
        for _ in range(count):
            start = time.perf_counter()
            plain_cte(scale.store, target)
            found["cte"].append(time.perf_counter() - start)
            start, cpu = time.perf_counter(), time.thread_time()
            revert_preview(scale, target)
            found["cpu"].append(time.thread_time() - cpu)
            found["preview"].append(time.perf_counter() - start)
        return found
    finally:
        if warm:
            OPEN_GRAPHS.close(scale.plan_id)


def _row(backend: str, size: int, share: float, affected: int, cold: Any, warm: Any) -> Any:
    ms = 1e3
    row = {"backend": backend, "plan": size, "share": share, "affected": affected}
    for name, times in (("cold", cold), ("warm", warm)):
        cte, preview = times["cte"], times["preview"]
        row[f"{name}_cte_min"], row[f"{name}_cte_median"] = (
            min(cte) * ms,
            statistics.median(cte) * ms,
        )
        row[f"{name}_min"], row[f"{name}_median"] = (
            min(preview) * ms,
            statistics.median(preview) * ms,
        )
        row[f"{name}_ratio_min"] = min(preview) / min(cte)
        row[f"{name}_ratio_median"] = statistics.median(preview) / statistics.median(cte)
    row["cold_cpu_median"] = statistics.median(cold["cpu"]) * ms
    return row


def main(argv: list[str]) -> None:
    backend, sizes, shares, pairs, out = argv
    server = PostgresServer(find_bindir() or Path("/nonexistent")) if backend == "pg" else None
    rows = []
    if server is not None:
        server.start()
    try:
        for size in (int(s) for s in sizes.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                url = server.create_database(f"pairs_{size}") if server else None
                scale = build(Path(tmp), size, url)
                try:
                    for share in (float(s) for s in shares.split(",")):
                        target, affected = target_near(scale, share)
                        count = int(pairs) if share < 0.3 else max(3, int(pairs) // 4)
                        cold = _pairs(scale, target, count, warm=False)
                        warm = _pairs(scale, target, count, warm=True)
                        row = _row(backend, size, share, affected, cold, warm)
                        rows.append(row)
                        print(
                            f"{backend} {size} {affected} ({share:.1%}): CTE "
                            f"{row['cold_cte_min']:.3f}; {row['cold_cte_median']:.3f} ms, cold "
                            f"{row['cold_min']:.3f} ms {row['cold_ratio_min']:.2f}x; "
                            f"{row['cold_ratio_median']:.2f}x, warm {row['warm_ratio_min']:.2f}x; "
                            f"{row['warm_ratio_median']:.2f}x, CPU {row['cold_cpu_median']:.3f} ms",
                            flush=True,
                        )
                finally:
                    scale.store.close()
    finally:
        if server is not None:
            server.stop()
    Path(out).write_text(json.dumps(rows, indent=1), "utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
