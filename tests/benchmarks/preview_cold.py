"""The correction preview after a write, against its CTE, many pairs turn about (issue 22):
the cold preview's named runs in docs/benchmarks.md. preview_pairs times a preview repeated
with nothing written in between; bench_correction_scale's cold preview follows a write
rolled back. Here each pair is the CTE, then a write, then the preview, for three writes:

- ``none``: nothing written (as preview_pairs: the repeated preview);
- ``rolled back``: bench_correction_scale's supersede ``UPDATE`` of the affected set, rolled
  back — it changes nothing a preview shows;
- ``committed``: a setting committed through the store (a unit of work) — a write that does
  not touch the plan, which a whole-database change signal still sees;
- ``another``: the same committed through another engine on the same database, as another
  process (or the store's held recording connection) writes.

``python -m tests.benchmarks.preview_cold BACKEND SIZES SHARES PAIRS OUT.json`` — BACKEND
``sqlite`` (a file) or ``pg`` (a throwaway server, tests/support/postgres.py); SIZES and
SHARES comma-separated. One plan per size, a pruned checkpoint group at each decision, its
targets as bench_correction_scale picks them. It uses only what main had before this file,
so the code before a change can be measured with it (``PYTHONPATH`` at that tree).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cleveragents_tui.store.store import Store
from tests.benchmarks.bench_correction_scale import plain_cte, supersede_floor
from tests.support.postgres import PostgresServer, find_bindir
from tests.support.scale_plan import (
    ScalePlan,
    add_pruned_groups,
    build,
    revert_preview,
    target_near,
)

WRITES = ("none", "rolled back", "committed", "another")


def _write(
    scale: ScalePlan, other: Store, target: str, affected: list[str], kind: str
) -> Callable[[], None]:
    def committed(store: Store) -> None:
        with store.unit_of_work(write=True) as uow:
            uow.settings.set("bench", "preview_cold", time.time())
            uow.commit()

    writes: dict[str, Callable[[], None]] = {
        "none": lambda: None,
        "rolled back": lambda: supersede_floor(scale.store, target, affected),
        "committed": lambda: committed(scale.store),
        "another": lambda: committed(other),
    }
    return writes[kind]


def _pairs(
    scale: ScalePlan, other: Store, target: str, count: int, kind: str
) -> dict[str, list[float]]:
    affected = plain_cte(scale.store, target)
    write = _write(scale, other, target, affected, kind)
    for _ in range(3):  # warm-up: compiled statements, page cache
        plain_cte(scale.store, target)
        write()
        revert_preview(scale, target)
    found: dict[str, list[float]] = {"cte": [], "preview": []}
    for _ in range(count):
        start = time.perf_counter()
        plain_cte(scale.store, target)
        found["cte"].append(time.perf_counter() - start)
        write()
        start = time.perf_counter()
        revert_preview(scale, target)
        found["preview"].append(time.perf_counter() - start)
    return found


def _row(backend: str, size: int, affected: int, kind: str, times: Any) -> dict[str, Any]:
    cte, preview = times["cte"], times["preview"]
    return {
        "backend": backend,
        "plan": size,
        "affected": affected,
        "write": kind,
        "cte_min": min(cte) * 1e3,
        "cte_median": statistics.median(cte) * 1e3,
        "preview_min": min(preview) * 1e3,
        "preview_median": statistics.median(preview) * 1e3,
        "ratio_min": min(preview) / min(cte),
        "ratio_median": statistics.median(preview) / statistics.median(cte),
    }


def main(argv: list[str]) -> None:
    backend, sizes, shares, pairs, out = argv
    server = PostgresServer(find_bindir() or Path("/nonexistent")) if backend == "pg" else None
    rows = []
    if server is not None:
        server.start()
    try:
        for size in (int(s) for s in sizes.split(",")):
            with tempfile.TemporaryDirectory() as tmp:
                url = server.create_database(f"cold_{size}") if server else None
                scale = build(Path(tmp), size, url)
                targets = [(float(s), *target_near(scale, float(s))) for s in shares.split(",")]
                add_pruned_groups(scale, keep={scale.ids[0], *(t for _, t, _ in targets)})
                other = Store.open(url or str(Path(tmp) / "agents.db"))
                try:
                    for share, target, affected in targets:
                        count = int(pairs) if share < 0.3 else max(3, int(pairs) // 4)
                        for kind in WRITES:
                            row = _row(
                                backend,
                                size,
                                affected,
                                kind,
                                _pairs(scale, other, target, count, kind),
                            )
                            rows.append(row)
                            print(
                                f"{backend} {size} {affected} {kind}: CTE "
                                f"{row['cte_min']:.3f}; {row['cte_median']:.3f} ms, preview "
                                f"{row['preview_min']:.3f}; {row['preview_median']:.3f} ms = "
                                f"{row['ratio_min']:.2f}x; {row['ratio_median']:.2f}x",
                                flush=True,
                            )
                finally:
                    other.close()
                    scale.store.close()
    finally:
        if server is not None:
            server.stop()
    Path(out).write_text(json.dumps(rows, indent=1), "utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
