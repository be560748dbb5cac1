"""What the crash and fault loops run in child processes, each on one work folder: the store
``agents.db``, the sandboxes under ``sandboxes/`` and the demo project under ``demo/``.

``python -m tests.reliability.scenario`` is a fork server: it imports the engine once, then
for each request on stdin (a JSON list: a function of this module and its arguments) forks
a child that calls it, and answers with the child's exit status (``-9`` when it was killed).
A child costs milliseconds instead of the second an interpreter needs to import SQLAlchemy,
pydantic and LangGraph, so the loops can afford a fresh process for every crash.

Stages:

- ``run``: build the demo project and run the demo plan (``auto`` profile) to its Apply gate;
- ``run-all``: the same with the demo extended to every sandbox strategy (``apply_world.py``:
  two overlay folders, and a PostgreSQL table when the work folder names a database);
- ``correct``: on a plan stopped there, revert its first Execute decision, then revert its
  strategy (back to Strategize: the child plan is cancelled and spawned again), then apply;
- ``apply``: on a plan stopped there, apply it (``agents plan apply``).

Every operation the engine has acknowledged is written to the acknowledgement file as soon
as it returns, one flushed line at a time, so the parent that kills the child knows what must
have survived: ``decision <id>`` (the engine's post-commit notice, the one the app's open
influence graphs get), ``correction <id> <status>``, ``applied <plan>``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy.orm import configure_mappers

from cleveragents_tui import failpoints
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import (
    CorrectionMode,
    DecisionType,
    Phase,
    PlanState,
    SandboxStrategyName,
)
from cleveragents_tui.engine.core.influence import OPEN_GRAPHS
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes
from cleveragents_tui.engine.correct import execute as correction_execute
from cleveragents_tui.engine.correct import preview as correction_preview
from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.ops.doctor import (
    repair_corrections,
    repair_half_applied,
    repair_left_running,
)
from cleveragents_tui.engine.ops.invariants import check_invariants
from cleveragents_tui.engine.ops.recovery import recover_pending_groups
from cleveragents_tui.engine.run.lifecycle import apply_plan, resume_plan
from cleveragents_tui.engine.run.runner import PlanRunner, RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.reliability import apply_world

FIRST_GUIDANCE = "only the unit test"
SECOND_GUIDANCE = "use a greeter class"
CHILD_SECONDS = 300


class Work:
    """One work folder: where the store, the sandboxes and the demo project live."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.db = self.folder / "agents.db"
        self.sandboxes = self.folder / "sandboxes"
        self.demo = self.folder / "demo"

    def store(self) -> Store:
        return Store.open(str(self.db))

    def options(self) -> RunOptions:
        return RunOptions(sandbox_base=self.sandboxes)


class _Acks:
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the child

    def __call__(self, *words: str) -> None:
        self._file.write(" ".join(words) + "\n")
        self._file.flush()  # in the kernel's hands: a SIGKILL cannot lose it


def _acknowledge_recorded(ack: _Acks) -> None:
    recorded = OPEN_GRAPHS.recorded

    def and_ack(decision: Decision, depends_on: Iterable[str] = ()) -> None:
        recorded(decision, depends_on)
        ack("decision", decision.decision_id)

    OPEN_GRAPHS.recorded = and_ack  # type: ignore[method-assign]


def top_plan(store: Store) -> str | None:
    with store.unit_of_work() as uow:
        return next((p.plan_id for p in uow.plans.all() if p.parent_plan_id is None), None)


def _current(store: Store, plan_id: str, phase: Phase, kind: DecisionType) -> str:
    with store.unit_of_work() as uow:
        return next(
            d.decision_id
            for d in uow.decisions.for_plan(plan_id, include_superseded=False)
            if d.phase is phase and d.decision_type is kind
        )


def revert(store: Store, decision_id: str, guidance: str, options: RunOptions) -> Any:
    impact = correction_preview.preview(store, decision_id, CorrectionMode.REVERT, guidance)
    return correction_execute.execute(
        store, impact, acknowledged=True, requested_by="reliability", options=options
    )


def first_execute_decision(store: Store, plan_id: str) -> str:
    return _current(store, plan_id, Phase.EXECUTE, DecisionType.IMPLEMENTATION_CHOICE)


def stage(folder: str, name: str, failpoint: str | None, acks: str) -> None:
    """A child process: run one stage with ``failpoint`` switched on."""
    if failpoint:
        os.environ[failpoints.ENV_VAR] = failpoint
    ack = _Acks(acks)
    _acknowledge_recorded(ack)
    work = Work(folder)
    store, options = work.store(), work.options()
    if name in ("run", "run-all"):
        demo = build_demo(store, work.demo)
        if name == "run-all":
            apply_world.extend(store, demo, apply_world.postgres_url(work.folder))
        action = load_action(str(demo.action_file))
        plan = start_plan(store, action, profile_override="auto", options=options)
        ack("plan", plan.plan_id, plan.state.value)
    elif name == "correct":
        plan_id = top_plan(store)
        assert plan_id is not None
        for target, guidance in (
            (first_execute_decision(store, plan_id), FIRST_GUIDANCE),
            (
                _current(store, plan_id, Phase.STRATEGIZE, DecisionType.STRATEGY_CHOICE),
                SECOND_GUIDANCE,
            ),
        ):
            done = revert(store, target, guidance, options).correction
            ack("correction", done.correction_id, done.status.value)
        if apply_plan(store, plan_id, "reliability", options).state is PlanState.APPLIED:
            ack("applied", plan_id)
    else:  # apply
        plan_id = top_plan(store)
        assert plan_id is not None
        if apply_plan(store, plan_id, "reliability", options).state is PlanState.APPLIED:
            ack("applied", plan_id)
    ack("hits", json.dumps(failpoints.hits(), sort_keys=True))
    ack("done")


def recover_and_check(folder: str, out: str) -> None:
    """A child process, the restart after a crash: recovery, the invariants, then the plan
    resumed as far as it goes and the invariants again."""
    work = Work(folder)
    store, options = work.store(), work.options()
    groups = recover_pending_groups(store, work.sandboxes)
    corrections = repair_corrections(store)
    finished = repair_half_applied(store, work.sandboxes)  # an Apply the kill stopped
    paused = repair_left_running(store, work.sandboxes)  # a run the kill stopped
    first = check_invariants(store, base_dir=work.sandboxes)
    plan_id = top_plan(store)
    state = None
    if plan_id is not None:
        try:
            if plan_id in paused:  # what a user does next: `agents plan run`
                state = resume_plan(store, plan_id, options).state.value
            else:
                state = PlanRunner(store, plan_id, options).run().state.value
        except Exception as exc:  # reported, the parent fails the test with it
            state = f"resume failed: {type(exc).__name__}: {exc}"
    again = check_invariants(store, base_dir=work.sandboxes)
    Path(out).write_text(
        json.dumps(
            {
                "recovered_groups": len(groups),
                "recovered_corrections": len(corrections),
                "finished_applies": len(finished),
                "violations": [v.__dict__ for v in first.violations + again.violations],
                "checked": sum(first.checked.values()) + sum(again.checked.values()),
                "resumed_state": state,
            }
        ),
        encoding="utf-8",
    )


def applied_result(folder: str, out: str) -> None:
    """A child process: what the real resources hold (the Apply crash loop's check that a
    rerun finished the job exactly): the apply branch's tree and the user's HEAD (and its
    history without dates), the rows of the app database (and of the PostgreSQL one), the files of the docs,
    team chat and overlay folders, and every plan's state."""
    work = Work(folder)
    store = work.store()
    plan_id = top_plan(store)
    repo = work.demo / "hello-cli"
    branch = f"refs/heads/cleveragents/apply/{plan_id}"
    found: dict[str, Any] = {
        "real-repo-head": _git(repo, "rev-parse", "HEAD"),
        "real-repo-log": _git(repo, "log", "--format=%s %T", "HEAD"),  # the same in any run
        "apply-branch-tree": subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "-q", "--verify", f"{branch}^{{tree}}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip(),
    }
    with sqlite3.connect(work.demo / "app.db") as real:
        found["real-db"] = [list(r) for r in real.execute("SELECT * FROM releases ORDER BY id")]
    real.close()
    for folder_name in ("docs", "team-chat"):
        found[f"real-{folder_name}"] = _files(work.demo / folder_name)
    for folder_name in ("site", "wiki"):  # overlays: folders too (a move leaves none behind)
        if (work.demo / folder_name).is_dir():
            found[f"real-{folder_name}"] = apply_world.tree(work.demo / folder_name)
    postgres = apply_world.postgres_url(work.folder)
    if postgres:
        found["real-pg-db"] = apply_world.pg_rows(postgres)
    with store.unit_of_work() as uow:
        found["states"] = sorted(f"{p.phase.value}/{p.state.value}" for p in uow.plans.all())
    Path(out).write_text(json.dumps(found, sort_keys=True), encoding="utf-8")


def discard_databases(folder: str, out: str) -> None:
    """A child process: discard every database sandbox of the work folder's plans (a
    PostgreSQL copy sandbox keeps databases on the server until then); writes how many."""
    work = Work(folder)
    store = work.store()
    discarded = 0
    with store.unit_of_work() as uow:
        plans = [p.plan_id for p in uow.plans.all()]
        databases = {
            r.resource_id
            for r in uow.resources.all()
            if r.sandbox_strategy is SandboxStrategyName.TRANSACTION_ROLLBACK
        }
    for plan_id in plans:
        sandboxes = PlanSandboxes(store, plan_id, work.sandboxes)
        for resource_id in sorted(databases):
            with contextlib.suppress(Exception):  # never made, or already gone
                sandboxes.get(resource_id).discard()
                discarded += 1
    Path(out).write_text(json.dumps({"discarded": discarded}), encoding="utf-8")


def append_after_apply(folder: str, out: str) -> None:
    """A child process: apply the plan at its gate, then append a correction to its strategy
    (above the applied child plan); writes the plans' states and the checker's findings."""
    work = Work(folder)
    store, options = work.store(), work.options()
    plan_id = top_plan(store)
    assert plan_id is not None
    apply_plan(store, plan_id, "reliability", options)
    strategy = _current(store, plan_id, Phase.STRATEGIZE, DecisionType.STRATEGY_CHOICE)
    with store.unit_of_work() as uow:
        spawned = [c.plan_id for c in uow.plans.children(plan_id)]  # before the append
    impact = correction_preview.preview(
        store, strategy, CorrectionMode.APPEND, "also a --shout flag"
    )
    assert impact.children == ()  # an append cancels no child plan
    correction_execute.execute(
        store, impact, acknowledged=True, requested_by="reliability", options=options
    )
    with store.unit_of_work() as uow:
        states = {p.plan_id: p.state.value for p in uow.plans.all()}
    report = check_invariants(store, base_dir=work.sandboxes)
    Path(out).write_text(
        json.dumps(
            {
                "children": spawned,
                "states": states,
                "violations": [v.__dict__ for v in report.violations],
            }
        ),
        encoding="utf-8",
    )


# -- the fault loop ---------------------------------------------------------------------------


def _files(root: Path) -> dict[str, str]:
    """Every file's bytes (hex), but git's own folder and ``__pycache__`` (git ignores those;
    a ``.pyc`` holds its source's mtime, so it differs each time the tests run)."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        skipped = relative.parts[0] == ".git" or "__pycache__" in relative.parts
        if skipped or not path.is_file() or path.is_symlink():
            continue
        found[str(relative)] = path.read_bytes().hex()
    return found


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(folder), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def resources(work: Work, store: Store, plan_id: str) -> dict[str, Any]:
    """Every resource of the plan, in its sandbox and for real: files byte for byte (a git
    worktree's too: its HEAD moves to a new checkpoint commit of the same files when a
    rollback is undone), the rows, and the user's own HEAD."""
    sandboxes = PlanSandboxes(store, plan_id, work.sandboxes)
    found: dict[str, Any] = {"real-repo-head": _git(work.demo / "hello-cli", "rev-parse", "HEAD")}
    with store.unit_of_work() as uow:
        named = uow.plan_actions.get(plan_id)["resources"]
        assert isinstance(named, list)
        for resource in (uow.resources.get(str(r)) for r in named):
            sandbox = sandboxes.get(resource.resource_id)
            kind = resource.sandbox_strategy.value
            if kind == "transaction_rollback":
                rows = sandbox.execute("SELECT id, version, notes FROM releases ORDER BY id")  # type: ignore[attr-defined]
                found[resource.resource_id] = [list(r) for r in rows]
            elif kind != "none":
                assert sandbox.workdir is not None
                found[resource.resource_id] = _files(sandbox.workdir)
    with sqlite3.connect(work.demo / "app.db") as real:
        found["real-db"] = [list(r) for r in real.execute("SELECT * FROM releases ORDER BY id")]
    real.close()
    for folder in ("docs", "team-chat"):
        found[f"real-{folder}"] = _files(work.demo / folder)
    return found


def fault_target(store: Store, which: str) -> tuple[str, str]:
    """(plan, decision) the fault loop corrects: ``parent`` — the demo plan's first Execute
    decision (git worktree and database rollback); ``child`` — the Execute decision of its
    child plan (the docs folder, a filesystem copy)."""
    with store.unit_of_work() as uow:
        plans = uow.plans.all()
    top = next(p.plan_id for p in plans if p.parent_plan_id is None)
    if which == "parent":
        return top, first_execute_decision(store, top)
    child = next(p.plan_id for p in plans if p.parent_plan_id == top)
    return child, first_execute_decision(store, child)


def fault_correction(folder: str, which: str, failpoint: str, out: str) -> None:
    """A child process: one correction with ``failpoint`` switched on; writes its outcome,
    the resources after it, and what the invariant checker found."""
    work = Work(folder)
    store, options = work.store(), work.options()
    plan_id, target = fault_target(store, which)
    before_tree = _current_ids(store, plan_id)
    if failpoint:
        os.environ[failpoints.ENV_VAR] = failpoint
    error = None
    try:
        revert(store, target, FIRST_GUIDANCE, options)
    except Exception as exc:  # the outcome is judged by the parent
        error = f"{type(exc).__name__}: {exc}"
    os.environ.pop(failpoints.ENV_VAR, None)
    hits = failpoints.hits()
    with store.unit_of_work() as uow:
        attempts = uow.corrections.for_plan(plan_id)
        state = uow.plans.get(plan_id).state
    # The correction was made but its replay stopped halfway: recorded failed with the plan
    # errored (or a plan left running): run it on, as the correction's message says.
    replay_failed = bool(attempts) and attempts[-1].report.get("replay") == "failed"
    resumed = state is PlanState.RUNNING or replay_failed
    if resumed:
        state = resume_plan(store, plan_id, options).state
    report = check_invariants(store, base_dir=work.sandboxes)
    Path(out).write_text(
        json.dumps(
            {
                "error": error,
                "status": attempts[-1].status.value if attempts else None,
                "plan_state": state.value,
                "resumed": resumed,
                "tree_unchanged": _current_ids(store, plan_id) == before_tree,
                "resources": resources(work, store, plan_id),
                "violations": [v.__dict__ for v in report.violations],
                "hits": hits,
            }
        ),
        encoding="utf-8",
    )


def _current_ids(store: Store, plan_id: str) -> list[str]:
    with store.unit_of_work() as uow:
        return [d.decision_id for d in uow.decisions.for_plan(plan_id, include_superseded=False)]


def snapshot(folder: str, which: str, out: str) -> None:
    """A child process: the resources as they are (the fault loop's "before")."""
    work = Work(folder)
    store = work.store()
    plan_id, _ = fault_target(store, which)
    Path(out).write_text(json.dumps(resources(work, store, plan_id)), encoding="utf-8")


# Modules the engine imports on first use: imported by the server once, not by each child.
_PRELOAD = (
    "alembic.command",
    "cleveragents_tui.actors.command_tools",
    "cleveragents_tui.actors.file_tools",
    "cleveragents_tui.actors.notify_tool",
    "cleveragents_tui.actors.sql_tool",
    "cleveragents_tui.sandbox.filesystem_copy",
    "cleveragents_tui.sandbox.git",
    "cleveragents_tui.sandbox.none",
    "cleveragents_tui.sandbox.overlay",
    "cleveragents_tui.sandbox.transaction",
    "langchain_core.tracers.stdout",
)


def serve() -> None:
    """The fork server loop (see the module docstring)."""
    for module in _PRELOAD:
        importlib.import_module(module)
    configure_mappers()
    for line in sys.stdin:
        name, *args = json.loads(line)
        pid = os.fork()
        if pid == 0:
            signal.alarm(CHILD_SECONDS)  # a child that hangs dies instead of the test
            code = 0
            try:
                globals()[name](*args)
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)


if __name__ == "__main__":
    serve()
