"""Concurrency: separate processes on one plan, on SQLite and PostgreSQL (issue 9, item 6).

tests/e2e/test_correction_concurrency.py already shows, with two threads of one process, that
of two corrections racing exactly one runs. These tests use two *processes* (forked workers,
each with its own store, as two `agents` commands would be) and add the races it lacks:

- one process holds the plan in the middle of its correction while the other corrects it;
- two processes let go of a correction at the same instant (after a barrier);
- an Apply while a correction runs, and a correction while an Apply runs;
- a correction while another process is inside the transaction that takes the plan (the
  row lock of PostgreSQL's ``FOR UPDATE NOWAIT``, SQLite's write lock);
- a plan executing in one process, paused inside each of its database transactions, while
  the other process reads its tree.

Workers are synchronised through pipes and a pause at a named failpoint (the worker's
``failpoints.hit`` stops at the Nth matching hit and waits for the parent's "release"), so no
test sleeps or times anything; every wait is bounded (:data:`TIMEOUT`) and a worker that
does not answer fails the test as a deadlock instead of hanging it. After each race: exactly
one side won, the other got a one-line refusal, every decision recorded before is still there
(and as many were added as the winner's correction makes), and the invariant checker finds
nothing. The figures (races run, outcomes by kind, tree reads) go to ``races.json``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui import failpoints
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import CorrectionMode, Phase, PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.correct.execute import execute
from cleveragents_tui.engine.correct.preview import preview
from cleveragents_tui.engine.ops.invariants import check_invariants
from cleveragents_tui.engine.read.browse import plan_tree
from cleveragents_tui.engine.run.lifecycle import apply_plan
from cleveragents_tui.engine.run.plans import ACTORS, create_plan
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.reliability.harness import record_figures
from tests.support.folders import add_folder

TIMEOUT = 120.0  # seconds a worker may take to answer before the test calls it a deadlock
REPEAT = 2  # each race, per database
CONTEXT = multiprocessing.get_context("fork")

Pause = tuple[str, str | None, tuple[int, ...]]  # failpoint, detail (None: any), hit numbers

FIGURES: dict[str, Any] = {"races": 0, "outcomes": Counter(), "tree_reads": 0, "violations": 0}


# --- the plan the races are about ----------------------------------------------------------------


def _write(resource: str, path: str, content: str) -> dict[str, Any]:
    return {
        "tool": "local/write-file",
        "arguments": {"resource": resource, "path": path, "content": content},
    }


def race_action(resource: str) -> Action:
    """Strategize once, then three Execute decisions that write a file each, one depending on
    the other; guidance with "louder" picks the other alternative."""

    def step(key: str, after: str | None) -> dict[str, Any]:
        return {
            "key": key,
            "type": "implementation_choice",
            "parent": "plan",
            "depends_on": [after] if after else [],
            "question": f"What goes in {key}.txt?",
            "alternatives": [
                {"option": f"{key} quietly", "tool_calls": [_write(resource, f"{key}.txt", "q\n")]},
                {
                    "option": f"{key} louder",
                    "match": ["louder"],
                    "tool_calls": [_write(resource, f"{key}.txt", "LOUD\n")],
                },
            ],
        }

    return Action.model_validate(
        {
            "name": "rel/race",
            "prompt": "write three files",
            "resources": [resource],
            "decisions": [
                {
                    "key": "plan",
                    "type": "strategy_choice",
                    "question": "How many files?",
                    "alternatives": [{"option": "three small files"}],
                },
                step("one", None),
                step("two", "one"),
                step("three", "two"),
            ],
        }
    )


class World:
    """A store (the parent's own), the sandbox folder, and a fresh plan per race."""

    def __init__(self, store: Store, url: str, root: Path) -> None:
        self.store = store
        self.url = url
        self.root = root
        self.base = root / "sandboxes"
        self.options = RunOptions(sandbox_base=self.base)
        self.count = 0

    def resource(self) -> str:
        """A new directory resource: each plan applies to its own real folder."""
        self.count += 1
        real = self.root / f"real-{self.count}"
        real.mkdir(parents=True)
        (real / "seed.txt").write_text("seed\n")
        resource_id = f"rel/files-{self.count}"
        add_folder(self.store, resource_id, real)
        return resource_id

    def plan_at_apply_gate(self) -> tuple[str, dict[str, str]]:
        """A plan run to its Apply gate (profile auto); its current decisions by step key."""
        plan = start_plan(
            self.store, race_action(self.resource()), profile_override="auto", options=self.options
        )
        assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
        return plan.plan_id, self.steps(plan.plan_id)

    def steps(self, plan_id: str) -> dict[str, str]:
        with self.store.unit_of_work() as uow:
            return {k: d for k, (d, _) in uow.decisions.current_steps(plan_id).items()}

    def real_folder(self, plan_id: str) -> Path:
        """The real folder the plan applies to."""
        with self.store.unit_of_work() as uow:
            resources = uow.plan_actions.get(plan_id)["resources"]
            assert isinstance(resources, list) and len(resources) == 1
            return Path(uow.resources.get(str(resources[0])).location)

    def decisions(self, plan_id: str) -> set[str]:
        with self.store.unit_of_work() as uow:
            return {d.decision_id for d in uow.decisions.for_plan(plan_id)}

    def check(self) -> None:
        report = check_invariants(self.store, base_dir=self.base)
        FIGURES["violations"] += len(report.violations)
        assert report.ok, report.violations


@pytest.fixture
def world(store: Store, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(tmp_path / "sandboxes"))
    monkeypatch.delenv(failpoints.ENV_VAR, raising=False)
    return World(store, db_url, tmp_path)


# --- the workers -----------------------------------------------------------------------------


@contextlib.contextmanager
def paused_at(conn: Connection, pause: Pause | None) -> Iterator[None]:
    """Stop this process at the given hits of a failpoint: tell the parent, wait for it."""
    if pause is None:
        yield
        return
    name, detail, numbers = pause
    original = failpoints.hit
    seen = [0]

    def hit(point: str, point_detail: str | None = None) -> None:
        if point == name and (detail is None or point_detail == detail):
            seen[0] += 1
            if seen[0] in numbers:
                conn.send(("paused", point, point_detail, seen[0]))
                assert conn.recv() == ("release",)
        original(point, point_detail)

    failpoints.hit = hit  # type: ignore[assignment]
    try:
        yield
    finally:
        failpoints.hit = original


def _correct(
    store: Store,
    options: RunOptions,
    conn: Connection,
    decision_id: str,
    guidance: str,
    mode: str = "revert",
) -> str:
    impact = preview(store, decision_id, CorrectionMode(mode), guidance)
    conn.send(("previewed",))
    assert conn.recv() == ("go",)
    result = execute(store, impact, acknowledged=True, requested_by=f"pid {os.getpid()}",
                     options=options)  # fmt: skip
    return result.correction.status.value


def _apply(store: Store, options: RunOptions, conn: Connection, plan_id: str) -> str:
    return apply_plan(store, plan_id, f"pid {os.getpid()}", options).state.value


def _run(store: Store, options: RunOptions, conn: Connection, plan_id: str) -> str:
    plan = PlanRunner(store, plan_id, options).run()
    return f"{plan.phase.value}/{plan.state.value}"


def _tree(store: Store, options: RunOptions, conn: Connection, plan_id: str) -> list[Any]:
    tree = plan_tree(store, plan_id, show_superseded=True)
    return [
        (line.row.decision_id, line.row.parent_decision_id, line.row.superseded_by)
        for line in tree.lines
    ]


OPERATIONS: dict[str, Callable[..., Any]] = {
    "correct": _correct,
    "apply": _apply,
    "run": _run,
    "tree": _tree,
}


def _serve(conn: Connection, url: str, base: str) -> None:
    """A worker: its own store, then operations from the pipe until "stop"."""
    os.environ["AGENTS_SANDBOX_DIR"] = base
    store = Store.open(url)
    options = RunOptions(sandbox_base=Path(base))
    while True:
        message = conn.recv()
        if message == ("stop",):
            break
        operation, pause, args = message
        try:
            with paused_at(conn, pause):
                answer: tuple[Any, ...] = ("ok", OPERATIONS[operation](store, options, conn, *args))
        except UserError as exc:
            answer = ("refused", type(exc).__name__, str(exc))
        except BaseException:
            answer = ("crashed", traceback.format_exc())
        conn.send(answer)
    store.close()


class Worker:
    """One process with its own store; every answer is awaited at most :data:`TIMEOUT`."""

    def __init__(self, world: World, base: Path | None = None) -> None:
        """``base``: its own sandbox folder, as a process on another machine sharing the
        database would have (then the run lease in the folder does not keep it out)."""
        self.conn, child = CONTEXT.Pipe()
        self.process = CONTEXT.Process(
            target=_serve, args=(child, world.url, str(base or world.base)), daemon=True
        )
        self.process.start()
        child.close()

    def start(self, operation: str, *args: Any, pause: Pause | None = None) -> None:
        self.conn.send((operation, pause, args))

    def send(self, *message: Any) -> None:
        self.conn.send(message)

    def receive(self) -> tuple[Any, ...]:
        if not self.conn.poll(TIMEOUT):
            raise AssertionError(
                f"worker {self.process.pid} did not answer within {TIMEOUT:.0f}s: a deadlock?"
            )
        answer: tuple[Any, ...] = self.conn.recv()
        assert answer[0] != "crashed", answer[1]
        return answer

    def expect(self, *head: Any) -> tuple[Any, ...]:
        answer = self.receive()
        assert answer[: len(head)] == head, answer
        return answer

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(("stop",))
        self.process.join(TIMEOUT)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(TIMEOUT)


@pytest.fixture
def workers(world: World) -> Iterator[tuple[Worker, Worker]]:
    pair = (Worker(world), Worker(world))
    yield pair
    for worker in pair:
        worker.close()


def _outcome(kind: str, answer: tuple[Any, ...]) -> str:
    """``won`` or the refusal's class, counted in the figures."""
    label = "won" if answer[0] == "ok" else answer[1]
    FIGURES["outcomes"][f"{kind}: {label}"] += 1
    return label


def _refusal(answer: tuple[Any, ...]) -> str:
    assert answer[0] == "refused", answer
    message = str(answer[2])
    assert "\n" not in message, "a refusal is one line"
    return message


# --- two corrections -------------------------------------------------------------------------


def test_while_a_process_is_inside_its_correction_another_correction_and_apply_are_refused(
    world: World, workers: tuple[Worker, Worker]
) -> None:
    """Process 1 is inside its correction (the plan taken, its resources about to roll back).
    Process 2 corrects the same decision: refused at once as busy; then applies the plan:
    refused, nothing lands. Process 1 finishes, and the plan waits at the Apply gate of the
    new attempt with exactly the decisions its correction made."""
    first, second = workers
    plan_id, _ = world.plan_at_apply_gate()
    real = world.real_folder(plan_id)
    for race in range(REPEAT):  # each race on the plan as the previous one left it
        steps = world.steps(plan_id)
        before = world.decisions(plan_id)
        first.start("correct", steps["two"], "louder", pause=("rollback.safety", None, (1,)))
        second.start("correct", steps["two"], "quieter")
        first.expect("previewed")
        second.expect("previewed")
        first.send("go")
        first.expect("paused", "rollback.safety")
        second.send("go")
        refused = second.receive()
        assert _outcome("correction vs held correction", refused) == "PlanBusyError"
        assert f"is busy: process {first.process.pid} is correcting it" in _refusal(refused)
        second.start("apply", plan_id)
        refused = second.receive()
        assert _outcome("apply vs held correction", refused) == "PlanBusyError"
        assert "is correcting it" in _refusal(refused)
        first.send("release")
        assert first.expect("ok")[1] == "succeeded"
        _outcome("held correction", ("ok",))
        FIGURES["races"] += 2
        after = world.decisions(plan_id)
        assert before <= after and len(after) == len(before) + 3  # guidance, two, three again
        with world.store.unit_of_work() as uow:
            plan = uow.plans.get(plan_id)
            statuses = [c.status.value for c in uow.corrections.for_plan(plan_id)]
        assert statuses == ["succeeded"] * (race + 1)
        assert (plan.phase, plan.state) == (Phase.EXECUTE, PlanState.AWAITING_APPROVAL)
        assert sorted(p.name for p in real.iterdir()) == ["seed.txt"]  # nothing landed
        world.check()


def test_a_correction_while_another_process_is_taking_the_plan(
    world: World, workers: tuple[Worker, Worker], db_url: str
) -> None:
    """Process 1 stops inside the transaction that takes the plan (PostgreSQL: the plan row
    locked FOR UPDATE; SQLite: the write lock). Process 2's correction: PostgreSQL refuses at
    once — the run lease is an advisory lock on the server (engine/run/run_lease.py), taken
    before the plan row — with "an agents process using the same database holds it"; on
    SQLite it waits for the lock (busy timeout), so process 1 is let go first and process 2
    then finds its correction running: "is busy". Process 2 has a sandbox folder of its own, as on
    another machine sharing the database (on one machine the run lease in the shared folder
    refuses it before it reaches the database: the test above), and appends (a revert would
    first find it cannot reach the sandboxes to roll back, and be refused for that)."""
    first, _ = workers
    second = Worker(world, base=world.base.parent / "another-machine")
    postgres = "://" in db_url
    plan_id, _ = world.plan_at_apply_gate()
    try:
        _race_for_the_plan_lock(world, first, second, plan_id, postgres)
    finally:
        second.close()


def _race_for_the_plan_lock(
    world: World, first: Worker, second: Worker, plan_id: str, postgres: bool
) -> None:
    for race in range(REPEAT):
        steps = world.steps(plan_id)
        first.start("correct", steps["two"], "louder", pause=("store.commit", None, (1,)))
        second.start("correct", steps["two"], "quieter", "append")
        first.expect("previewed")
        second.expect("previewed")
        first.send("go")
        first.expect("paused", "store.commit")
        second.send("go")
        if postgres:
            refused = second.receive()  # NOWAIT: no waiting on process 1
            first.send("release")
        else:
            first.send("release")
            refused = second.receive()
        if postgres:  # the run lease's advisory lock on the server refuses it first
            assert _outcome("correction vs plan lock", refused) == "PlanBusyError"
            expected = "an agents process using the same database holds it"
        else:
            assert _outcome("correction vs plan lock", refused) == "ConcurrentChangeError"
            expected = "is busy: correction"
        assert expected in _refusal(refused)
        assert first.expect("ok")[1] == "succeeded"
        FIGURES["races"] += 1
        with world.store.unit_of_work() as uow:
            statuses = [c.status.value for c in uow.corrections.for_plan(plan_id)]
        assert statuses == ["succeeded"] * (race + 1)
        world.check()


def test_two_processes_let_go_of_a_correction_at_once(
    world: World, workers: tuple[Worker, Worker]
) -> None:
    """Both previewed, both released together: one corrects, the other is refused with one
    line (busy, changed since the preview, or the database busy), never both, never a hang."""
    first, second = workers
    allowed = ("is busy", "changed since the preview", "changing this database")
    plan_id, _ = world.plan_at_apply_gate()
    for race in range(REPEAT):
        steps = world.steps(plan_id)
        before = world.decisions(plan_id)
        for worker, guidance in ((first, "louder"), (second, "louder still")):
            worker.start("correct", steps["one"], guidance)
        first.expect("previewed")
        second.expect("previewed")
        first.send("go")
        second.send("go")
        answers = [first.receive(), second.receive()]
        labels = sorted(_outcome("correction vs correction", a) for a in answers)
        FIGURES["races"] += 1
        assert labels.count("won") == 1, answers
        [refused] = [a for a in answers if a[0] == "refused"]
        assert any(word in _refusal(refused) for word in allowed), refused
        after = world.decisions(plan_id)
        assert before <= after and len(after) == len(before) + 4  # guidance + one, two, three
        with world.store.unit_of_work() as uow:
            statuses = [c.status.value for c in uow.corrections.for_plan(plan_id)]
        assert statuses == ["succeeded"] * (race + 1)
        world.check()


# --- a correction and an apply -----------------------------------------------------------------


def test_a_correction_while_another_process_applies_is_refused(
    world: World, workers: tuple[Worker, Worker]
) -> None:
    """Process 1 is landing the plan (Apply, about to write the real folder); process 2
    corrects a decision: it must be refused as busy, and the plan be applied as approved at
    its Apply gate — not rolled back and replayed underneath the Apply."""
    first, second = workers
    for _ in range(1):
        plan_id, steps = world.plan_at_apply_gate()
        before = world.decisions(plan_id)
        first.start("apply", plan_id, pause=("apply.resource", None, (1,)))
        first.expect("paused", "apply.resource")
        second.start("correct", steps["three"], "louder")
        answer = second.receive()  # refused at the preview: the plan is being applied
        if answer[0] == "previewed":  # or previewed first, then refused when it starts
            second.send("go")
            answer = second.receive()
        _outcome("correction vs held apply", answer)
        first.send("release")
        applied = first.receive()
        _outcome("held apply", applied)
        FIGURES["races"] += 1
        assert answer[0] == "refused", (answer, applied)
        assert "busy" in _refusal(answer) or "applying right now" in _refusal(answer)
        assert applied == ("ok", "applied")
        assert world.decisions(plan_id) == before
        world.check()


# --- reading while executing ---------------------------------------------------------------------


def test_reading_the_tree_while_another_process_executes_the_plan(
    world: World, workers: tuple[Worker, Worker]
) -> None:
    """Process 1 runs a plan, stopping inside each of its database transactions before it
    commits (holding the write lock on SQLite, row locks on PostgreSQL); each time process 2
    reads the tree: it is never blocked or refused, always sees a whole tree (one root, every
    parent present), and never loses a decision it saw before."""
    runner, reader = workers
    action = race_action(world.resource())
    plan, _ = create_plan(
        world.store, action, tools=default_registry(), actors=ACTORS, profile_override="auto"
    )
    with world.store.unit_of_work(write=True) as uow:
        uow.plan_actions.save(plan.plan_id, action.model_dump(mode="json"))
        uow.commit()
    stops = tuple(range(1, 1000))
    runner.start("run", plan.plan_id, pause=("store.commit", None, stops))
    seen: set[str] = set()
    reads = 0
    while True:
        answer = runner.receive()
        if answer[0] != "paused":
            break
        reader.start("tree", plan.plan_id)
        [tree] = reader.expect("ok")[1:]
        ids = {decision_id for decision_id, _, _ in tree}
        roots = [d for d, parent, _ in tree if parent is None]
        assert len(roots) <= 1 and all(p in ids for _, p, _ in tree if p is not None)
        assert seen <= ids, "a decision seen before disappeared"
        seen = ids
        reads += 1
        runner.send("release")
    assert answer == ("ok", "execute/awaiting_approval"), answer
    FIGURES["tree_reads"] += reads
    FIGURES["races"] += 1
    assert reads >= 20  # it did stop inside the plan's transactions
    assert seen <= world.decisions(plan.plan_id)
    world.check()


def teardown_module() -> None:
    record_figures(
        "races",
        races=FIGURES["races"],
        outcomes=dict(sorted(FIGURES["outcomes"].items())),
        tree_reads=FIGURES["tree_reads"],
        violations=FIGURES["violations"],
    )
