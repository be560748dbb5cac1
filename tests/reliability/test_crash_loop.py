"""Crash loop (issue 9, item 3): the demo plan and its corrections, SIGKILLed everywhere.

Two stages run in child processes (``scenario.py``): ``run`` (the demo plan to its Apply
gate) and ``correct`` (two reverts, one of them back to Strategize, then Apply). A dry run of
each counts how often every failpoint is reached. Then a stage is run again and killed
(``=kill``: SIGKILL, as a crash would) at:

- the first hit of every failpoint the ``correct`` stage reaches (record_decision, checkpoint
  groups, rollback, supersede, the end of a correction, apply, and the git, file, database
  and LangGraph calls), and of the git and file calls of the ``run`` stage (the first of
  them make the sandboxes);
- seeded-random points counted in failpoint hits (``*#N=kill``: the Nth failpoint reached,
  whichever it is) — deterministic, no clocks, no sleeps.

The soak (``nox -s soak``) also kills every failpoint of the ``run`` stage, the last hit of
every failpoint, and ``AGENTS_SOAK_ITERATIONS`` random points per stage.

After each kill a new process restarts: recovery (``recover_pending_groups`` and
``repair_corrections``, what ``agents doctor --repair`` does), the invariant checker, then the
plan resumed as far as it goes and the checker again. Every operation the killed process had
acknowledged must be in the store, no invariant may be violated, and the plan must resume.
"""

from __future__ import annotations

import random
from typing import Any

from tests.reliability import scenario
from tests.reliability.harness import (
    KILLED,
    Worker,
    hits_of,
    record_figures,
    share,
    soak_iterations,
)

SEED = 9
RANDOM_KILLS_PER_STAGE = 1
SANDBOX_MAKING = ("git.call", "fs.write")  # the run stage's first of these make sandboxes


def crash_points(stage: str, hits: dict[str, int], rng: random.Random) -> list[tuple[str, str]]:
    soak = soak_iterations(0) > 0
    names = sorted(n for n in hits if soak or stage == "correct" or n in SANDBOX_MAKING)
    points = [f"{name}=kill" for name in names]
    if soak:
        points += [f"{name}#{hits[name]}=kill" for name in names if hits[name] > 1]
    total = sum(hits.values())
    extra = soak_iterations(RANDOM_KILLS_PER_STAGE)
    points += [f"*#{n}=kill" for n in sorted(rng.sample(range(1, total + 1), extra))]
    return [(stage, point) for point in points]


def crash(worker: Worker, job: tuple[str, str]) -> dict[str, Any]:
    """Kill the stage at the point, restart, recover, check; what happened."""
    stage, point = job
    if stage == "run":
        worker.reset()
    else:
        worker.restore("gate")
    code, acks = worker.run_stage(stage, point)
    if code != KILLED:
        return {"problem": f"{stage} {point}: not killed (exit {code})"}
    result = worker.in_child(scenario.recover_and_check)
    lost = worker.unacknowledged(acks)
    resumed = str(result["resumed_state"])
    problem = None
    if lost or result["violations"] or resumed.startswith("resume failed"):
        problem = (
            f"{stage} {point} ({len(acks)} acks): violations {result['violations']}, "
            f"lost {lost}, resumed: {resumed}"
        )
    return {**result, "acks": len(acks), "problem": problem}


def test_sigkill_at_every_failpoint_and_at_random_points_loses_nothing(team: list[Worker]) -> None:
    run_hits = team[0].run_hits
    team[0].restore("gate")
    code, acks = team[0].run_stage("correct", None)
    assert code == 0 and acks[-1] == ["done"], acks
    correct_hits = hits_of(acks)
    clean = team[0].in_child(scenario.recover_and_check)
    assert clean["violations"] == [] and clean["resumed_state"] == "applied", clean

    rng = random.Random(SEED)
    points = crash_points("run", run_hits, rng) + crash_points("correct", correct_hits, rng)
    results = share(team, points, crash)
    failures = [r["problem"] for r in results if r["problem"]]
    record_figures(
        "crash_loop",
        crash_points=len(points),
        failpoints_reached={"run": len(run_hits), "correct": len(correct_hits)},
        acknowledged_operations=sum(r.get("acks", 0) for r in results),
        recovered=sum(
            r.get("recovered_groups", 0) + r.get("recovered_corrections", 0) for r in results
        ),
        things_checked=sum(r.get("checked", 0) for r in results),
        violations=len(failures),
    )
    assert failures == [], "\n".join(failures)
