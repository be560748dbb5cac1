"""Apply crash loop (issue 21, item 1): `plan apply` SIGKILLed anywhere is finished by a rerun.

The demo plan waits at its Apply gate with resources of every strategy (``apply_world.py``):
a git worktree (the hello-cli repository: an apply branch), an SQLite database (one
transaction), a filesystem copy (the docs folder, landed by the child plan's journal), two
overlays (a site folder edited, written, deleted from and moved in; a wiki folder, the child
plan's), ``none`` (team chat) and, in the PostgreSQL loop, a PostgreSQL table (a row
inserted, one updated, one deleted). The ``apply`` stage (``scenario.py``) applies it; a
dry run counts the failpoints it reaches and records what the real resources then hold.
Then, from a new gate each time, the stage is run again and SIGKILLed at:

- the first hit of every failpoint it reaches (the journal's commits, each git command,
  each file written), and every hit of ``apply.resource`` and ``apply.landed`` (before and
  after each resource lands) and of ``sqlite.land``, ``postgres.land`` and
  ``transaction.commit`` (before and after a database's COMMIT), and the last store commit
  (every resource landed, the plan not yet marked applied); in the soak (``nox -s soak``) every hit of every failpoint;
- seeded-random points counted in failpoint hits (``*#N=kill``): 2, and in the soak four
  per ``AGENTS_SOAK_ITERATIONS`` (100 at its default of 25: at least 100 kills).

After each kill a new process does what a person would: ``agents doctor --repair``
(which finishes a half-applied Apply and pauses a plan left running), then ``agents plan
run``. The checks:

- **0 stuck**: the plan ends ``applied`` (never constrained by its own landed content);
- **0 half-applied**: every real resource holds exactly what the uninterrupted Apply left
  there (the apply branch's tree, the user's HEAD history, every row, every file and folder
  byte for byte), and every plan is applied;
- no invariant violated (``half-applied`` among them), before and after the rerun.

A new gate is the demo run to its Apply gate again in an emptied work folder (and, in the
PostgreSQL loop, marked ``postgres``, a new database on the throwaway server of
tests/conftest.py). A saved gate cannot be copied back instead: an overlay tells a real
folder's change by its files' inodes and change times, which a copy renews (the real folder
would rightly look changed by someone else), and what the server holds cannot be saved. So
results are compared without what differs between two runs: the user's HEAD commit (its
history's subjects and trees are compared) and the team chat's send times.
"""

from __future__ import annotations

import contextlib
import json
import random
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from tests.reliability import scenario
from tests.reliability.apply_world import POSTGRES_URL_FILE
from tests.reliability.harness import (
    KILLED,
    Worker,
    hits_of,
    record_figures,
    share,
    soak_iterations,
    workers,
)
from tests.support.postgres import PostgresServer

SEED = 21
RANDOM_KILLS = 2
EVERY_HIT = ("apply.landed", "apply.resource", "postgres.land", "sqlite.land", "transaction.commit")


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


class FreshGates:
    """A new gate for each kill: the work folder emptied and the demo (with every strategy)
    run to its Apply gate again; with a server, on a new target database (the worker's
    previous one dropped first). ``held``: another client stays connected to the target
    while the sandbox is made, so the server cannot copy it: the sandbox is then one
    transaction with savepoints."""

    def __init__(self, server: PostgresServer | None, *, held: bool = False) -> None:
        self.server = server
        self.held = held
        self.databases: dict[int, str] = {}

    def __call__(self, worker: Worker) -> None:
        self.drop(worker)
        worker.reset()
        if self.server is not None:
            name = self.databases[worker.number] = f"apply_{secrets.token_hex(6)}"
            url = self.server.create_database(name)
            (worker.path / POSTGRES_URL_FILE).write_text(url, encoding="utf-8")
        with self._other_client(worker):
            code, acks = worker.run_stage("run-all", None)
        assert code == 0 and acks[-1] == ["done"], acks

    @contextlib.contextmanager
    def _other_client(self, worker: Worker) -> Iterator[None]:
        if not self.held or self.server is None:
            yield
            return
        engine = create_engine(self.server.url(self.databases[worker.number]), poolclass=NullPool)
        try:
            with engine.connect():
                yield
        finally:
            engine.dispose()

    def drop(self, worker: Worker) -> None:
        """Discard the worker's database sandboxes (a copy sandbox's databases live on the
        server), then drop its target database."""
        if self.server is not None and worker.number in self.databases:
            worker.in_child(scenario.discard_databases)
            self.server.drop_database(self.databases.pop(worker.number))

    def drop_all(self, team: list[Worker]) -> None:
        for worker in team:
            self.drop(worker)


def across_runs(held: dict[str, Any]) -> dict[str, Any]:
    """What two runs of the demo leave alike: not the user's HEAD commit (its date differs;
    its history's subjects and trees are compared) nor the team chat's send times."""
    chat = {
        path: [
            {k: v for k, v in json.loads(line).items() if k != "time"}
            for line in bytes.fromhex(content).decode().splitlines()
        ]
        for path, content in held["real-team-chat"].items()
    }
    return {**{k: v for k, v in held.items() if k != "real-repo-head"}, "real-team-chat": chat}


def crash(expected: dict[str, Any], gate: FreshGates) -> Callable[[Worker, str], dict[str, Any]]:
    def one(worker: Worker, point: str) -> dict[str, Any]:
        """Kill the Apply at ``point``, recover and rerun it, compare the real resources."""
        gate(worker)
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
        held = across_runs(worker.in_child(scenario.applied_result))
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


def uninterrupted(worker: Worker, gate: FreshGates) -> tuple[dict[str, int], dict[str, Any]]:
    """The failpoints an Apply nobody interrupts reaches, and what it leaves on the real
    resources."""
    gate(worker)
    code, acks = worker.run_stage("apply", None)
    assert code == 0 and acks[-1] == ["done"] and acks[-3][:1] == ["applied"], acks
    held = across_runs(worker.in_child(scenario.applied_result))
    assert held["apply-branch-tree"] and held["real-docs"], held
    assert "posts/draft.md" in held["real-site"] and "notes" not in held["real-site"], held
    assert "obsolete.txt" not in held["real-site"] and "Hello.md" in held["real-wiki"], held
    assert set(held["states"]) == {"apply/applied"}, held
    return hits_of(acks), held


def run_loop(
    name: str, team: list[Worker], gate: FreshGates
) -> tuple[dict[str, int], dict[str, Any]]:
    """The loop: the uninterrupted Apply, then every crash point; its figures recorded, every
    problem found failed on. Returns the uninterrupted Apply's failpoint hits and what it
    left on the real resources."""
    started = time.monotonic()
    try:
        hits, expected = uninterrupted(team[0], gate)
        points = crash_points(hits, random.Random(SEED))
        results = share(team, points, crash(expected, gate))
    finally:
        gate.drop_all(team)
    failures = [r["problem"] for r in results if r["problem"]]
    record_figures(
        name,
        kills=len(points),
        failpoints_reached=len(hits),
        failpoint_hits=sum(hits.values()),
        finished_by_doctor=sum(r.get("finished_applies", 0) for r in results),
        stuck=sum(1 for r in results if r.get("stuck")),
        half_applied=sum(1 for r in results if r.get("half")),
        violations=len(failures),
        seconds=round(time.monotonic() - started),
    )
    assert failures == [], "\n".join(failures)
    return hits, expected


def test_sigkill_anywhere_in_apply_is_finished_by_a_rerun(tmp_path: Path) -> None:
    run_loop("apply_crash_loop", workers(tmp_path), FreshGates(None))


@pytest.mark.postgres
@pytest.mark.parametrize("sandbox", ["copy", "savepoints"])
def test_sigkill_anywhere_in_apply_with_postgres_is_finished_by_a_rerun(
    postgres_server: PostgresServer, tmp_path: Path, sandbox: str
) -> None:
    """Both PostgreSQL sandboxes: copies of the database (the default), and one transaction
    with savepoints (when the server cannot copy the target: here another client is
    connected to it while the sandbox is made), whose COMMIT ``transaction.commit`` cuts."""
    gates = FreshGates(postgres_server, held=sandbox == "savepoints")
    hits, expected = run_loop(f"apply_crash_loop_postgres_{sandbox}", workers(tmp_path), gates)
    assert ("postgres.land" if sandbox == "copy" else "transaction.commit") in hits, hits
    assert expected["real-pg-db"] == [[1, "1.0.0", "first release, greeted"], [3, "1.1.0", "hello"]]
