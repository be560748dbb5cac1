"""Apply crash loop (issue 21, item 1): `plan apply` SIGKILLed anywhere is finished by a rerun.

The demo plan waits at its Apply gate with four resources of four strategies: a git worktree
(the hello-cli repository: an apply branch), an SQLite database (one transaction), a
filesystem copy (the docs folder, landed by the child plan's journal) and ``none`` (team
chat). The ``apply`` stage (``scenario.py``) applies it; a dry run counts the failpoints it
reaches and records what the real resources then hold. Then the stage is run again from the
gate and SIGKILLed at:

- the first hit of every failpoint it reaches (the journal's commits, each git command,
  each file written), and every hit of ``apply.resource`` and ``apply.landed`` (before and
  after each resource lands) and of ``sqlite.land`` (before and after the database's
  COMMIT), and the last store commit (every resource landed, the plan not yet marked
  applied); in the soak (``nox -s soak``) every hit of every failpoint;
- seeded-random points counted in failpoint hits (``*#N=kill``): 2, and in the soak four
  per ``AGENTS_SOAK_ITERATIONS`` (100 at its default of 25: at least 100 kills).

After each kill a new process does what a person would: ``agents doctor --repair``
(which finishes a half-applied Apply and pauses a plan left running), then ``agents plan
run``. The checks:

- **0 stuck**: the plan ends ``applied`` (never constrained by its own landed content);
- **0 half-applied**: every real resource holds exactly what the uninterrupted Apply left
  there (the apply branch's tree, the user's HEAD, every row, every file byte), and every
  plan is applied;
- no invariant violated (``half-applied`` among them), before and after the rerun.
"""

from __future__ import annotations

import random
from typing import Any

from tests.reliability import scenario
from tests.reliability.harness import (
    KILLED,
    Worker,
    hits_of,
    on_each,
    record_figures,
    share,
    soak_iterations,
)

SEED = 21
RANDOM_KILLS = 2
EVERY_HIT = ("apply.landed", "apply.resource", "sqlite.land")


def crash_points(hits: dict[str, int], rng: random.Random) -> list[str]:
    soak = soak_iterations(0) > 0
    names = sorted(hits)
    points = [f"{name}=kill" for name in names]
    # Before and after each resource's landing and the database's COMMIT, on every strategy.
    points += [f"{n}#{i}=kill" for n in EVERY_HIT if n in hits for i in range(2, hits[n] + 1)]
    # The last store commit marks the plan applied: killed before it, everything has landed.
    points += [] if soak else [f"store.commit#{hits['store.commit']}=kill"]
    total = sum(hits.values())
    if soak:  # every hit of every failpoint, and 4 random kills per soak iteration
        points += [
            f"{n}#{i}=kill" for n in names if n not in EVERY_HIT for i in range(2, hits[n] + 1)
        ]
        random_kills = rng.choices(range(1, total + 1), k=4 * soak_iterations(0))
    else:
        random_kills = rng.sample(range(1, total + 1), min(total, RANDOM_KILLS))
    return points + [f"*#{n}=kill" for n in sorted(random_kills)]


def expected_result(worker: Worker) -> dict[str, Any]:
    """What the uninterrupted Apply leaves on this worker's real resources (each worker built
    its own demo project: its commits differ)."""
    worker.restore("gate")
    code, acks = worker.run_stage("apply", None)
    assert code == 0 and acks[-1] == ["done"] and acks[-3][:1] == ["applied"], acks
    return worker.in_child(scenario.applied_result)


def crash(expected_for: dict[int, dict[str, Any]]) -> Any:
    def one(worker: Worker, point: str) -> dict[str, Any]:
        """Kill the Apply at ``point``, recover and rerun it, compare the real resources."""
        worker.restore("gate")
        code, acks = worker.run_stage("apply", point)
        if code != KILLED:
            return {"problem": f"apply {point}: not killed (exit {code})"}
        result = worker.in_child(scenario.recover_and_check)
        if result["resumed_state"] == "awaiting_approval":
            # Killed before the gate's approval was stored: nothing was applied, and the
            # user's next step is `agents plan apply` again.
            code, again = worker.run_stage("apply", None)
            result["resumed_state"] = "applied" if ["applied"] in [a[:1] for a in again] else code
        lost = worker.unacknowledged(acks)
        held = worker.in_child(scenario.applied_result)
        expected = expected_for[worker.number]
        stuck = result["resumed_state"] != "applied"
        half = held != expected
        problem = None
        if stuck or half or lost or result["violations"]:
            differs = sorted(k for k in expected if held.get(k) != expected[k])
            problem = (
                f"apply {point}: resumed {result['resumed_state']}; differs {differs}; "
                f"violations {result['violations']}; lost {lost}"
            )
        return {**result, "stuck": stuck, "half": half, "problem": problem}

    return one


def test_sigkill_anywhere_in_apply_is_finished_by_a_rerun(team: list[Worker]) -> None:
    team[0].restore("gate")
    code, acks = team[0].run_stage("apply", None)
    assert code == 0 and acks[-1] == ["done"], acks
    hits = hits_of(acks)
    expected = dict(zip((w.number for w in team), on_each(team, expected_result), strict=True))
    for held in expected.values():
        assert held["apply-branch-tree"] and held["real-docs"], held
        assert set(held["states"]) == {"apply/applied"}, held

    points = crash_points(hits, random.Random(SEED))
    results = share(team, points, crash(expected))
    failures = [r["problem"] for r in results if r["problem"]]
    record_figures(
        "apply_crash_loop",
        kills=len(points),
        failpoints_reached=len(hits),
        failpoint_hits=sum(hits.values()),
        finished_by_doctor=sum(r.get("finished_applies", 0) for r in results),
        stuck=sum(1 for r in results if r.get("stuck")),
        half_applied=sum(1 for r in results if r.get("half")),
        violations=len(failures),
    )
    assert failures == [], "\n".join(failures)
