"""`agents plan tree` on a plan of 10,000 decisions, end to end (a fresh process each time).

The tree is a random recursive tree (each decision's parent drawn uniformly from the earlier
ones), the usual model of a growing tree: broad, about ln(n) deep.

Baseline: the least any Python tool could do — a bare ``sqlite3`` script in a fresh
process that selects the same rows and prints one line per decision.
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
from pathlib import Path

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import DecisionType
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store.store import Store
from tests.benchmarks.harness import Measurement, min_and_median

TYPES = [t for t in DecisionType if t.phase is not None and t is not DecisionType.PROMPT_DEFINITION]
BASELINE = """
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute("SELECT decision_id, parent_decision_id, decision_type, chosen_option FROM decisions "
                 "WHERE plan_id = ? AND superseded_by IS NULL ORDER BY sequence_number", (sys.argv[2],)).fetchall()
sys.stdout.write("\\n".join(f"{r[0]} {r[1]} {r[2]}: {r[3]}" for r in rows) + "\\n")
"""


def build_plan(path: Path, count: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    store = Store.open(str(path))
    plan = Plan(action="bench/large-plan")
    ids: list[str] = []
    batch: list[Decision] = []
    for n in range(count):
        kind = DecisionType.PROMPT_DEFINITION if n == 0 else rng.choice(TYPES)
        decision = Decision(
            plan_id=plan.plan_id,
            parent_decision_id=None if n == 0 else ids[rng.randrange(n)],
            sequence_number=n,
            decision_type=kind,
            phase=kind.phase,
            question=f"question {n}",
            chosen_option=f"option {n} " + "x" * rng.randrange(0, 40),
            confidence_score=rng.random(),
        )
        ids.append(decision.decision_id)
        batch.append(decision)
    with store.unit_of_work(write=True) as uow:
        uow.plans.add(plan)
        uow.flush()
        uow.decisions.add_many(batch)
        uow.commit()
    store.close()
    return plan.plan_id


def run(quick: bool) -> list[Measurement]:
    count = 2_000 if quick else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        plan_id = build_plan(db, count)
        agents = [
            sys.executable,
            "-m",
            "cleveragents_tui",
            "--db",
            str(db),
            "plan",
            "tree",
            plan_id,
        ]
        baseline = [sys.executable, "-c", BASELINE, str(db), plan_id]
        startup = [sys.executable, "-c", "pass"]

        def run_quiet(command: list[str]) -> None:
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=120)

        run_quiet(agents)  # warm the page cache and .pyc files
        repeat = 3 if quick else 7
        ours, ours_median = min_and_median(lambda: run_quiet(agents), repeat)
        bare, bare_median = min_and_median(lambda: run_quiet(baseline), repeat)
        python, python_median = min_and_median(lambda: run_quiet(startup), repeat)
    return [
        Measurement(
            "plan tree",
            f"agents plan tree, {count:,} decisions",
            ours,
            "bare sqlite3 script",
            bare,
            "< 1 s wall time",
            ours < 1.0,
            ours_median,
            bare_median,
        ),
        Measurement(
            "plan tree",
            "python startup alone",
            python,
            "bare sqlite3 script",
            bare,
            "(context)",
            None,
            python_median,
            bare_median,
        ),
    ]
