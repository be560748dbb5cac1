"""What a user waits for when correcting a large plan (issue 22): the full
``preview(REVERT)`` — cold, and with the app's warm influence graph open — and its
``execute`` (the revert without the replay), at 1,000 and 10,000 decisions (100,000 when
``AGENTS_BENCH_100K=1``: it takes minutes, so it is run by hand, outside CI) for targets
affecting ~0.5%, ~5%, ~40% and ~100% of the plan; in a SQLite file, and on PostgreSQL
(a throwaway server, tests/support/postgres.py) when its binaries are installed.

The plan is real (tests/support/scale_plan.py): a scripted action run to its Apply gate with
a directory sandbox and a ``none`` resource, then a random recursive tree of Execute
decisions with influence edges and one tool call each, so every part of the preview has
rows to read; and, as a plan that made that many Execute decisions holds, a checkpoint group
at each of them, pruned by the budget (their rows stay).

Baselines, measured in the same run on the same plan from the same target:

- one plain recursive CTE (bench_impact's, sent as SQLAlchemy ``text()`` on a connection)
  — the least a one-off question about the affected subtree can cost;
- ADR-035's reference loop ("Affected Subtree Computation"): three queries per affected
  decision, each a SQLAlchemy ``text()`` statement — the per-node pattern.

- execute's least write: the affected decisions marked superseded in one ``text()``
  ``UPDATE`` (its foreign keys' and triggers' checks included), rolled back — ADR-035 keeps
  supersession on each decision, so no execute of a revert can write less;
- execute's durable writes: the time its own ``fsync``/``fdatasync`` calls took (outside
  the replay), the part of it that crash safety costs whatever the code around it.

The cold preview follows a write committed elsewhere in the store (``committed_elsewhere``),
untimed: the database changed since the last preview, as after any write.

Goals: preview ≤ 2× the CTE; execute ≤ 5×. Minimums and medians are both reported: on a
shared machine the minimum says what the code costs, the median what a user sees.

``execute`` is timed without the replay: the replay (PlanRunner.run, which re-makes the
action's steps) is timed on its own in the same call and subtracted. It runs last on each
plan (it changes the plan), so each plan gives one execute; a case builds several plans.
Every other plan's execute follows a correction of another, small plan in the same store
(scale_plan.correct_another): the app's process after its first correction, whose
statements SQLAlchemy has compiled already; the others are a command's first correction,
which compiles them (some 20 statements: a third of a small execute).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text

from cleveragents_tui.domain.enums import CorrectionStatus
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.model import CorrectionResult, Impact
from cleveragents_tui.engine.run.runner import PlanRunner
from cleveragents_tui.sandbox.objectstore import packs
from cleveragents_tui.store.store import Store
from tests.benchmarks.bench_impact import PLAIN_CTE
from tests.benchmarks.harness import Measurement
from tests.support.postgres import PostgresServer, find_bindir
from tests.support.scale_plan import (
    ScalePlan,
    add_pruned_groups,
    build,
    correct_another,
    revert_preview,
    target_near,
)

GROUP = "correction at scale"
SHARES = (0.005, 0.05, 0.40, 1.0)
CTE = text(PLAIN_CTE.replace("?", ":target"))
# PostgreSQL allows one recursive term: the two edge kinds as a LATERAL union (as
# store/impact_queries.py writes it there).
PG_CTE = text(
    """
WITH RECURSIVE affected(decision_id) AS (
  SELECT CAST(:target AS TEXT)
  UNION
  SELECT step.decision_id FROM affected a CROSS JOIN LATERAL (
    SELECT CAST(d.decision_id AS TEXT) AS decision_id FROM decisions d
    WHERE d.parent_decision_id = a.decision_id AND d.superseded_by IS NULL
    UNION ALL
    SELECT CAST(dd.downstream_ref AS TEXT) FROM decision_dependencies dd
    JOIN decisions d ON d.decision_id = dd.downstream_ref
    WHERE dd.upstream_decision_id = a.decision_id AND dd.dependency_type = 'decision'
    AND d.superseded_by IS NULL
  ) step
)
SELECT decision_id FROM affected
"""
)
CHILDREN = text(
    "SELECT decision_id FROM decisions WHERE parent_decision_id = :d AND superseded_by IS NULL"
)
DEPENDENTS = text(
    "SELECT dd.downstream_ref FROM decision_dependencies dd "
    "JOIN decisions d ON d.decision_id = dd.downstream_ref "
    "WHERE dd.upstream_decision_id = :d AND dd.dependency_type = 'decision' "
    "AND d.superseded_by IS NULL"
)
# Execute's least write: the affected decisions marked superseded, in one statement (ADR-035
# stores supersession on each decision), rolled back so the plan is left as it was.
SUPERSEDE = text(
    "UPDATE decisions SET superseded_by = :by WHERE superseded_by IS NULL "
    "AND decision_id IN (SELECT value FROM json_each(:ids))"
)
PG_SUPERSEDE = text(
    "UPDATE decisions SET superseded_by = :by WHERE superseded_by IS NULL "
    "AND decision_id = ANY(CAST(:ids AS TEXT[]))"
)
CHILD_PLANS = text(
    "SELECT downstream_ref FROM decision_dependencies "
    "WHERE upstream_decision_id = :d AND dependency_type = 'plan'"
)


def plain_cte(store: Store, target: str) -> list[str]:
    """The plain recursive CTE, one ``text()`` statement, as each backend allows it."""
    statement = PG_CTE if store.engine.dialect.name == "postgresql" else CTE
    with store.engine.connect() as connection:
        return list(connection.execute(statement, {"target": target}).scalars())


def supersede_floor(store: Store, target: str, affected: list[str]) -> None:
    """The affected decisions marked superseded (by the target: any decision will do for
    the foreign key) in one ``text()`` statement, then rolled back: what execute cannot do
    without, the foreign keys' and triggers' checks of each row included."""
    postgres = store.engine.dialect.name == "postgresql"
    ids: object = affected if postgres else json.dumps(affected)
    with store.engine.connect() as connection, connection.begin() as transaction:
        statement = PG_SUPERSEDE if postgres else SUPERSEDE
        updated = connection.execute(statement, {"by": target, "ids": ids}).rowcount
        transaction.rollback()
    if updated != len(affected):
        raise AssertionError(f"the floor superseded {updated} of {len(affected)} decisions")


def committed_elsewhere(store: Store) -> None:
    """A write committed to the store that touches no plan: before each cold preview, so
    the preview finds the database changed (its kept plan-level reads and SQLite's page
    cache of its connection go) — as after any write, the plan's own or another's. A
    write rolled back would not do: it changes nothing the preview reads, and the preview
    keeps its reads through one (store/reading.py)."""
    with store.unit_of_work(write=True) as uow:
        uow.settings.set("bench", "committed_elsewhere", time.time())
        uow.commit()


def adr_loop(store: Store, target: str) -> tuple[set[str], set[str]]:
    """ADR-035's reference loop, query for query, each a ``text()`` statement on one
    connection: children, dependents and child plans of every affected decision."""
    affected: set[str] = {target}
    plans: set[str] = set()
    queue = deque([target])
    with store.engine.connect() as connection:
        while queue:
            current = queue.popleft()
            following = {
                *connection.execute(CHILDREN, {"d": current}).scalars(),
                *connection.execute(DEPENDENTS, {"d": current}).scalars(),
            }
            for decision_id in following - affected:
                affected.add(decision_id)
                queue.append(decision_id)
            plans.update(connection.execute(CHILD_PLANS, {"d": current}).scalars())
    return affected, plans


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


@dataclass
class Durable:
    """The ``fsync``/``fdatasync`` calls an execute made outside its replay: how many, and
    the time spent in them — what crash safety costs that no code here can take off."""

    calls: int = 0
    seconds: float = 0.0


_SYNCS = ((os, "fsync"), (os, "fdatasync"), (packs, "_fdatasync"))


def execute_without_replay(scale: ScalePlan, impact: Impact) -> tuple[float, Durable]:
    """The time of ``execute`` less that of its replay (PlanRunner.run, timed inside it),
    and its own durable writes' calls (:class:`Durable`)."""
    replaying = 0.0
    in_replay = False
    durable = Durable()
    original = PlanRunner.run
    originals = [getattr(module, name) for module, name in _SYNCS]

    def timed_run(self: PlanRunner) -> Any:
        nonlocal replaying, in_replay
        start = time.perf_counter()
        in_replay = True
        try:
            return original(self)
        finally:
            in_replay = False
            replaying += time.perf_counter() - start

    def timed_sync(sync: Callable[[int], None]) -> Callable[[int], None]:
        def timed(fd: int) -> None:
            start = time.perf_counter()
            try:
                sync(fd)
            finally:
                if not in_replay:
                    durable.calls += 1
                    durable.seconds += time.perf_counter() - start

        return timed

    PlanRunner.run = timed_run  # type: ignore[method-assign]
    for (module, name), sync in zip(_SYNCS, originals, strict=True):
        setattr(module, name, timed_sync(sync))
    results: list[CorrectionResult] = []
    try:
        whole = _timed(
            lambda: results.append(
                execute(
                    scale.store,
                    impact,
                    acknowledged=True,
                    requested_by="bench",
                    options=scale.options,
                )
            )
        )
    finally:
        PlanRunner.run = original  # type: ignore[method-assign]
        for (module, name), sync in zip(_SYNCS, originals, strict=True):
            setattr(module, name, sync)
    if replaying == 0.0:
        raise AssertionError("the replay was not timed")
    if results[0].correction.status is not CorrectionStatus.SUCCEEDED:
        raise AssertionError(f"the correction {results[0].correction.status.value}")
    return whole - replaying, durable


@dataclass
class Samples:
    """Every timing of one case (plan size, share, backend), over all the plans built."""

    size: int = 0
    cte: list[float] = field(default_factory=list)
    loop: list[float] = field(default_factory=list)
    cold: list[float] = field(default_factory=list)
    warm: list[float] = field(default_factory=list)
    execute: list[float] = field(default_factory=list)  # a process's first correction
    durable: list[Durable] = field(default_factory=list)  # each of those's, in order
    execute_warm: list[float] = field(default_factory=list)  # after one (correct_another)
    supersede: list[float] = field(default_factory=list)


def measure_plan(scale: ScalePlan, share: float, samples: Samples, repeat: int, warm: bool) -> None:
    """Time the baselines and the previews on one plan (turn about), then one execute:
    ``warm``, after a correction of another plan in the same store."""
    target, samples.size = target_near(scale, share)
    add_pruned_groups(scale, keep={target, scale.ids[0]})
    samples.loop.append(_timed(lambda: adr_loop(scale.store, target)))
    affected = plain_cte(scale.store, target)
    for _ in range(repeat):
        samples.cte.append(_timed(lambda: plain_cte(scale.store, target)))
        committed_elsewhere(scale.store)
        samples.cold.append(_timed(lambda: revert_preview(scale, target)))
        samples.supersede.append(_timed(lambda: supersede_floor(scale.store, target, affected)))
    OPEN_GRAPHS.open(scale.store, scale.plan_id)  # the app's plan view holds it
    try:
        for _ in range(repeat):
            samples.warm.append(_timed(lambda: revert_preview(scale, target)))
    finally:
        OPEN_GRAPHS.close(scale.plan_id)
    if warm:
        correct_another(scale)
    took, durable = execute_without_replay(scale, revert_preview(scale, target))
    if warm:
        samples.execute_warm.append(took)
    else:
        samples.execute.append(took)
        samples.durable.append(durable)


@contextmanager
def backends(quick: bool) -> Iterator[list[tuple[str, Callable[[str], str | None]]]]:
    """(name, database URL for a plan named so: None for a SQLite file in its folder)."""
    found: list[tuple[str, Callable[[str], str | None]]] = [("SQLite", lambda _name: None)]
    bindir = None if quick else find_bindir()
    server = PostgresServer(bindir) if bindir is not None else None
    if server is not None:
        server.start()
        found.append(("PostgreSQL", server.create_database))
    try:
        yield found
    finally:
        if server is not None:
            server.stop()


def _case(
    backend: str, url_for: Callable[[str], str | None], count: int, share: float, plans: int
) -> Samples:
    samples = Samples()
    repeat = 3 if count <= 10_000 else 1
    for n in range(plans):
        with tempfile.TemporaryDirectory() as tmp:
            url = url_for(f"scale_{count}_{int(share * 1000)}_{n}")
            scale = build(Path(tmp), count, url)
            try:
                measure_plan(scale, share, samples, repeat, warm=n % 2 == 1)
            finally:
                scale.store.close()
    return samples


def _rows(backend: str, count: int, samples: Samples) -> list[Measurement]:
    label = (
        f"{backend}, {count:,} decisions, {samples.size:,} affected ({samples.size / count:.1%})"
    )
    cte_min, cte_median = min(samples.cte), statistics.median(samples.cte)
    rows = []
    cases = [
        ("preview(REVERT), cold", samples.cold, "≤ 2×", 2.0),
        ("preview(REVERT), app's warm graph", samples.warm, "≤ 2×", 2.0),
        ("execute without the replay", samples.execute, "≤ 5×", 5.0),
    ]
    if samples.execute_warm:
        what = "execute without the replay, statements compiled (the app's later corrections)"
        cases.append((what, samples.execute_warm, "≤ 5×", 5.0))
    for what, times, goal, factor in cases:
        best, median = min(times), statistics.median(times)
        rows.append(
            Measurement(
                GROUP, f"{what} ({label}), minimums", best, "one plain recursive CTE",
                cte_min, goal, best <= factor * cte_min,
            )
        )  # fmt: skip
        rows.append(
            Measurement(
                GROUP, f"{what} ({label}), medians", median, "one plain recursive CTE",
                cte_median, goal, median <= factor * cte_median,
            )
        )  # fmt: skip
    rows.append(
        Measurement(
            GROUP, f"the supersede UPDATE alone, rolled back ({label})", min(samples.supersede),
            "one plain recursive CTE", cte_min, "(execute's floor)", None,
        )
    )  # fmt: skip
    rows.append(
        Measurement(
            GROUP, f"execute without the replay ({label}), minimums", min(samples.execute),
            "the supersede UPDATE alone, rolled back", min(samples.supersede), "(context)", None,
        )
    )  # fmt: skip
    fastest = samples.durable[samples.execute.index(min(samples.execute))]
    rows.append(
        Measurement(
            GROUP,
            f"the fastest execute's own fsync/fdatasync calls ({fastest.calls}) alone ({label})",
            fastest.seconds, "one plain recursive CTE", cte_min, "(execute's durable floor)", None,
        )
    )  # fmt: skip
    rows.append(
        Measurement(
            GROUP, f"ADR-035 per-node loop, text() ({label})", min(samples.loop),
            "one plain recursive CTE", cte_min, "(baseline)", None,
        )
    )  # fmt: skip
    rows.append(
        Measurement(
            GROUP, f"preview(REVERT), cold ({label}), medians", statistics.median(samples.cold),
            "ADR-035 per-node loop, text()", statistics.median(samples.loop), "(context)", None,
        )
    )  # fmt: skip
    return rows


def run(quick: bool) -> list[Measurement]:
    counts = [1_000] if quick else [1_000, 10_000]
    if os.environ.get("AGENTS_BENCH_100K") == "1":
        counts.append(100_000)
    results: list[Measurement] = []
    with backends(quick) as found:
        for backend, url_for in found:
            for count in counts:
                for share in SHARES:
                    # half of them (from the second) give a warm execute (measure_plan)
                    plans = 1 if count > 10_000 else 2 if quick or count > 1_000 else 4
                    samples = _case(backend, url_for, count, share, plans)
                    results.extend(_rows(backend, count, samples))
    return results
