"""record_decision's cost: on the demo, as a share of a scripted Execute step; and at scale,
flat in plan size (issue 22).

*Demo*: the time spent recording an Execute decision (context snapshot + checkpoint group +
store) as a share of that step's total time (the step also decides, runs the decision's
tool calls, and records them).

*At scale*: one Execute decision recorded in a plan of 100, 10,000 and 100,000 decisions
(tests/support/scale_plan.py; 100,000 only with ``AGENTS_BENCH_100K=1``, outside CI), with
its checkpoint group over the plan's directory sandbox, an influence edge and a tool call
naming the ``none`` resource; in a SQLite file, and on PostgreSQL (the throwaway server of
tests/support/postgres.py) when its binaries are installed and the run is not ``--quick``.
Each recording is split in two, each against its own floor measured in the same run:

- *the database part*: the whole recording less the time inside the sandbox (checkpoint,
  verify): its reads, its transactions and the Python around them. Floor: the rows a
  recording inserted, inserted again (fresh keys) in ONE transaction on the driver's
  connection — what storing them costs at the least. The rows are those of the recording
  made just before the timed one, the same in all but keys and texts, heard through the
  engine's events: listening within the timed recording itself added ~0.3 ms of its ~1 ms
  (each statement dispatched to the listener, SQLAlchemy's dispatch rebuilt after each
  listen), which production recordings never pay. Goal: ≤ 3×, no growth with plan size.
  Between the two, the recording's own statements and transaction ends (the reads, the
  pending group's commit, the decision's) replayed on the driver's connection with fresh
  keys: what the protocol costs without SQLAlchemy and the Python around it. And the same
  floor timed right after the walk and ``fdatasync`` of the checkpoint floor below (its
  time left out), as the recording itself starts after them (and makes its statements
  after the sandbox's own ``fdatasync``): the first statement after such a wait costs
  several times what it costs warm (the caches are cold), and the floor above is timed
  warm, right after the recording (informational: the goal is stated against it).
- *the checkpoint*: the sandbox's own time. Floor: what a durable checkpoint of that tree
  costs at the least — a scandir+lstat walk of its work folder and one ``fdatasync``ed
  append of a checkpoint note (as bench_filesystem_copy's walk).

The whole recording is reported against the same row floor too, for continuity. And, after
the timed samples, the database part of recordings whose checkpoint is left out (the
sandbox's last ref given again: nothing scanned, packed or synced; informational): the
same code, without the sandbox's work between its halves, which leaves its working set
out of the CPU's caches (in place ~2× its cost this way, docs/benchmarks.md).
"""

from __future__ import annotations

import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import event

from cleveragents_tui.actors.base import Proposal, ToolCallRequest
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.engine.core.recorder import record_decision
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.run import steps as steps_module
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.benchmarks.bench_filesystem_copy import walk
from tests.benchmarks.harness import Measurement
from tests.support.postgres import PostgresServer, find_bindir
from tests.support.scale_plan import API, FILES, build

GROUP = "record_decision"
COMMIT, ROLLBACK = "COMMIT", "ROLLBACK"  # a transaction's end, as the replay sends it
KEYED = tuple(
    f"INSERT INTO {t} "
    for t in ("decisions", "checkpoint_groups", "checkpoint_metadata", "context_blobs")
)
ULID_OR_HASH = re.compile(r"^(?:[0-9A-HJKMNP-TV-Z]{26}|[0-9a-f]{64})$")


def _run_once(base: Path) -> tuple[float, float, int]:
    store = Store.open(str(base / "agents.db"))
    demo = build_demo(store, base / "demo")
    recording = 0.0
    stepping = 0.0
    steps = 0
    original_record = record_decision
    original_step = steps_module.step

    def timed_record(*args: Any, **kwargs: Any) -> Any:
        nonlocal recording
        start = time.perf_counter()
        try:
            return original_record(*args, **kwargs)
        finally:
            if kwargs.get("phase") is Phase.EXECUTE:
                recording += time.perf_counter() - start

    def timed_step(
        runner: PlanRunner, reasoner: Any, executor: Any, phase: Phase, state: Any, ref: Any
    ) -> Any:
        nonlocal stepping, steps
        start = time.perf_counter()
        try:
            return original_step(runner, reasoner, executor, phase, state, ref)
        finally:
            if phase is Phase.EXECUTE:
                stepping += time.perf_counter() - start
                steps += 1

    vars(steps_module)["record_decision"] = timed_record  # the step's own name for it
    vars(steps_module)["step"] = timed_step
    try:
        start_plan(
            store,
            load_action(str(demo.action_file)),
            profile_override="auto",
            options=RunOptions(sandbox_base=base / "sandboxes"),
        )
    finally:
        vars(steps_module)["record_decision"] = original_record
        vars(steps_module)["step"] = original_step
        store.close()
    return recording, stepping, steps


def _demo(quick: bool) -> Measurement:
    best: tuple[float, float, int] | None = None
    for _ in range(2 if quick else 5):
        with tempfile.TemporaryDirectory() as tmp:
            result = _run_once(Path(tmp))
        if best is None or result[1] < best[1]:
            best = result
    assert best is not None
    recording, stepping, steps = best
    return Measurement(
        GROUP,
        f"recording {steps} Execute decisions (demo)",
        recording,
        "whole Execute steps",
        stepping,
        "share of the step (informational)",
        None,
    )


Insert = tuple[str, Any]


def _fresh(inserts: list[Insert], sequence: int, fresh_sequence: int) -> list[Insert]:
    """The same statements with every key this recording made replaced by a fresh one (the
    first column of the tables keyed by it, the sequence number), so they can go in again."""

    def values(params: Any) -> list[Any]:
        return list(params.values()) if isinstance(params, dict) else list(params)

    made = {values(p)[0] for sql, p in inserts if sql.startswith(KEYED) and p}
    renamed: dict[Any, Any] = {
        key: (new_ulid() if len(key) == 26 else os.urandom(32).hex())
        for key in made
        if isinstance(key, str) and ULID_OR_HASH.match(key)
    }

    def swap(v: Any, decision: bool) -> Any:
        v = renamed.get(v, v) if isinstance(v, str) else v
        return fresh_sequence if decision and v == sequence and isinstance(v, int) else v

    fresh: list[Insert] = []
    for sql, params in inserts:
        decision = sql.startswith("INSERT INTO decisions ")  # the next sequence
        if params is None:  # a transaction's end
            fresh.append((sql, params))
        elif isinstance(params, dict):
            fresh.append((sql, {k: swap(v, decision) for k, v in params.items()}))
        else:
            fresh.append((sql, tuple(swap(v, decision) for v in params)))
    return fresh


@contextmanager
def _recording_connection(store: Store) -> Iterator[Any]:
    """The driver's connection recordings run on (the one the store holds between
    recordings): the floor and the replay meet the same SQLite page cache as the recording
    did, where another of the pool's connections would start colder (its own cache)."""
    with store.recordings() as transaction:
        yield transaction(False)._shared._raw  # type: ignore[union-attr]  # its driver's


def _floor(store: Store, inserts: list[Insert]) -> float:
    """One transaction of these INSERTs on the driver's connection, timed BEGIN to COMMIT."""
    sqlite = store.engine.dialect.name == "sqlite"
    with _recording_connection(store) as raw:
        if not sqlite:
            raw.rollback()  # the pool's connection may have begun one
        start = time.perf_counter()
        cursor = raw.cursor()
        if sqlite:
            cursor.execute("BEGIN IMMEDIATE")
        for sql, params in inserts:
            cursor.execute(sql, params)
        if sqlite:
            cursor.execute("COMMIT")
        else:
            raw.commit()
        elapsed = time.perf_counter() - start
        cursor.close()
    return elapsed


def _replayed(store: Store, sent: list[Insert]) -> float:
    """The recording's own statements and transactions, replayed on the driver's connection
    (fresh keys): what its protocol costs without SQLAlchemy and the Python around it."""
    sqlite = store.engine.dialect.name == "sqlite"
    with _recording_connection(store) as raw:
        if not sqlite:
            raw.rollback()
        start = time.perf_counter()
        cursor = raw.cursor()
        for sql, params in sent:
            if sql in (COMMIT, ROLLBACK) and not sqlite:
                raw.commit() if sql == COMMIT else raw.rollback()
            elif sql in (COMMIT, ROLLBACK):
                cursor.execute(sql)
            else:
                cursor.execute(sql, params)
                if cursor.description is not None:
                    cursor.fetchall()
        elapsed = time.perf_counter() - start
        cursor.close()
    return elapsed


def _forget_copies(store: Store, copies: list[Insert]) -> None:
    """Delete the checkpoint rows the floor and the replay inserted (untimed): they name the
    recording's own checkpoint, so they would count against the plan's budget and, once it
    is reached (50 live checkpoints: ~17 recordings), the pruning would drop that checkpoint
    from the sandbox three times over — the second drop fails (the ref is gone)."""
    ids = [
        (params["checkpoint_id"] if isinstance(params, dict) else params[0],)
        for sql, params in copies
        if sql.startswith("INSERT INTO checkpoint_metadata ")
    ]
    sqlite = store.engine.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"
    with _recording_connection(store) as raw:
        cursor = raw.cursor()
        cursor.executemany(f"DELETE FROM checkpoint_metadata WHERE checkpoint_id = {mark}", ids)
        cursor.close()
        raw.commit()


def _forget_checkpoints_of(store: Store, decision_id: str) -> None:
    """Delete a decision's checkpoint rows (untimed): recordings whose checkpoint is left
    out name a ref already counted, and past the plan's budget (50 live checkpoints) each
    would prune, which the timed recordings never do."""
    mark = "?" if store.engine.dialect.name == "sqlite" else "%s"
    with _recording_connection(store) as raw:
        cursor = raw.cursor()
        cursor.execute(
            f"DELETE FROM checkpoint_metadata WHERE decision_id = {mark}", (decision_id,)
        )
        cursor.close()
        raw.commit()


def _checkpoint_floor(work: Path, notes: Path) -> float:
    """A scandir+lstat walk of the work folder and one fdatasync'd append of a note."""
    start = time.perf_counter()
    walk(work)
    fd = os.open(notes, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, os.urandom(48).hex().encode() + b"\n")
        os.fdatasync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


@dataclass
class Samples:
    """Per recording: the whole, the part inside the sandbox, and the two floors."""

    whole: list[float] = field(default_factory=list)
    sandbox: list[float] = field(default_factory=list)
    rows: list[float] = field(default_factory=list)
    rows_cold: list[float] = field(default_factory=list)
    unsandboxed: list[float] = field(default_factory=list)  # the checkpoint left out
    protocol: list[float] = field(default_factory=list)
    checkpoint_floor: list[float] = field(default_factory=list)

    @property
    def database(self) -> list[float]:
        return [w - s for w, s in zip(self.whole, self.sandbox, strict=True)]


def _timing_sandbox(sandbox: Any, spent: list[float]) -> None:
    """Count the time spent in this sandbox's checkpoint work (instance attributes)."""
    for name in ("checkpoint", "verify", "drop_checkpoint"):
        method = getattr(sandbox, name)

        def timed(*args: Any, _method: Any = method) -> Any:
            start = time.perf_counter()
            try:
                return _method(*args)
            finally:
                spent[0] += time.perf_counter() - start

        setattr(sandbox, name, timed)


@contextmanager
def _checkpoint_left_out(sandbox: Any) -> Iterator[None]:
    """The sandbox's checkpoint gives its last ref again, and neither verifies nor drops
    one: a recording without the sandbox's work (its rows name a ref already made)."""
    ref = sandbox.checkpoint()
    names = ("checkpoint", "verify", "drop_checkpoint")
    kept = {name: vars(sandbox)[name] for name in names if name in vars(sandbox)}
    sandbox.checkpoint = lambda: ref
    sandbox.verify = sandbox.drop_checkpoint = lambda _ref: None
    try:
        yield
    finally:
        for name in names:
            vars(sandbox).pop(name, None)
        vars(sandbox).update(kept)


def _at_scale(count: int, repeat: int, url: str | None) -> Samples:
    """Samples of ``repeat`` recordings in a plan of ``count`` decisions (a fresh runner's
    sandboxes: the first recording of each reads what the plan wrote before, once), each
    timed with nobody listening, after one heard (untimed) for its floor and replay."""
    samples = Samples()
    with tempfile.TemporaryDirectory() as tmp:
        scale = build(Path(tmp), count, url)
        store = scale.store
        sandboxes = PlanSandboxes(store, scale.plan_id, scale.options.sandbox_base)
        spent = [0.0]
        _timing_sandbox(sandboxes.get(FILES), spent)
        work = sandboxes.get(FILES).workdir
        assert work is not None
        notes = Path(tmp) / "notes"
        sent: list[Insert] = []  # every statement, and each transaction's end as COMMIT/ROLLBACK

        def capture(*args: Any) -> None:  # the engine's event hears the driver's statements
            sql, params, many = args[2], args[3], args[5]
            sent.extend((sql, p) for p in params) if many else sent.append((sql, params))

        def commit(_connection: Any) -> None:
            sent.append((COMMIT, None))

        def rollback(_connection: Any) -> None:
            sent.append((ROLLBACK, None))

        listeners = {"before_cursor_execute": capture, "commit": commit, "rollback": rollback}

        def proposal(n: int) -> Proposal:
            return Proposal(
                key=f"bench-{n}",
                decision_type=DecisionType.IMPLEMENTATION_CHOICE,
                question=f"bench question {n}",
                chosen_option=f"bench option {n}",
                tool_calls=(ToolCallRequest("local/call", {"resource": API}),),
            )

        def record(n: int, made: Proposal | None = None) -> Any:
            return record_decision(
                store,
                sandboxes,
                plan_id=scale.plan_id,
                phase=Phase.EXECUTE,
                proposal=made or proposal(n),
                parent_id=scale.ids[-1],
                depends_on=(scale.ids[-2],),
                actor_ref=None,
                context={"bench": n, "plan": scale.plan_id},
            )

        try:
            for n in range(repeat):
                # a recording heard (untimed): its statements make the floor and the replay
                sent.clear()
                for name, listener in listeners.items():
                    event.listen(store.engine, name, listener)
                heard = record(2 * n).sequence_number
                for name, listener in listeners.items():
                    event.remove(store.engine, name, listener)
                samples.checkpoint_floor.append(_checkpoint_floor(work, notes))
                # the next one timed, with nobody listening (its proposal made before: the
                # actor's, not the recording's work)
                made = proposal(2 * n + 1)
                spent[0] = 0.0
                start = time.perf_counter()
                number = record(2 * n + 1, made).sequence_number
                samples.whole.append(time.perf_counter() - start)
                samples.sandbox.append(spent[0])
                inserts = [s for s in _fresh(sent, heard, number + 1) if s[0].startswith("INSERT")]
                samples.rows.append(_floor(store, inserts))
                replay = _fresh(sent, heard, number + 2)
                samples.protocol.append(_replayed(store, replay))
                cold = [s for s in _fresh(sent, heard, number + 3) if s[0].startswith("INSERT")]
                _checkpoint_floor(work, notes)  # the wait the recording starts after
                samples.rows_cold.append(_floor(store, cold))
                _forget_copies(store, [*inserts, *replay, *cold])
            with _checkpoint_left_out(sandboxes.get(FILES)):
                for n in range(2 * repeat, 3 * repeat):
                    made = proposal(n)
                    start = time.perf_counter()
                    decision_id = record(n, made).decision_id
                    samples.unsandboxed.append(time.perf_counter() - start)
                    _forget_checkpoints_of(store, decision_id)
        finally:
            store.close()
    return samples


def _measurements(backend: str, count: int, samples: Samples) -> list[Measurement]:
    where = f"{backend}, a plan of {count:,} decisions"
    rows = f"its rows inserted in one transaction ({backend})"
    out = []
    for what, ours, floor, baseline, target, limit in (
        (
            "database part of one Execute decision",
            samples.database,
            samples.rows,
            rows,
            "≤ 3×",
            3.0,
        ),
        (
            "checkpoint of one Execute decision",
            samples.sandbox,
            samples.checkpoint_floor,
            "walk + one fdatasync'd note",
            "",
            None,
        ),
        (
            "its statements and transactions on the driver's connection",
            samples.protocol,
            samples.rows,
            rows,
            "",
            None,
        ),
        (
            "database part of one Execute decision",
            samples.database,
            samples.protocol,
            f"its statements and transactions on the driver's connection ({backend})",
            "",
            None,
        ),
        (
            "database part of one Execute decision",
            samples.database,
            samples.rows_cold,
            f"its rows inserted in one transaction ({backend}) after a walk + fdatasync",
            "",
            None,
        ),
        ("one Execute decision, whole", samples.whole, samples.rows, rows, "", None),
        (
            "database part of one Execute decision, its checkpoint left out",
            samples.unsandboxed,
            samples.rows,
            rows,
            "",
            None,
        ),
    ):
        seconds, base = min(ours), min(floor)
        out.append(
            Measurement(
                GROUP,
                f"{what}, {where} (min; median)",
                seconds,
                baseline,
                base,
                target,
                None if limit is None else seconds <= limit * base,
                statistics.median(ours),
                statistics.median(floor),
            )
        )
    return out


@contextmanager
def backends(quick: bool) -> Iterator[list[tuple[str, Callable[[str], str | None]]]]:
    """(name, database URL for a database named so: None for a SQLite file): PostgreSQL
    when its binaries are installed and the run is not quick (as bench_correction_scale)."""
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


def run(quick: bool) -> list[Measurement]:
    results = [_demo(quick)]
    counts = [100, 10_000]
    if os.environ.get("AGENTS_BENCH_100K") == "1":
        counts.append(100_000)
    repeat = 10 if quick else 20  # 2 recordings each: under the budget of 50 live checkpoints
    with backends(quick) as found:
        for backend, url_for in found:
            for count in counts:
                samples = _at_scale(count, repeat, url_for(f"record_{count}"))
                results += _measurements(backend, count, samples)
    return results
