"""Ctrl+C while a command runs a plan or a correction.

The first Ctrl+C pauses the plan, as `agents plan pause` does: the runner finishes the step
it is in (a model call, a tool call and its checkpoint) and stops before its next decision,
where `agents plan run` goes on from. The second stops at once, as a crash would (every
step is crash-safe); the plan is then marked paused if the run left it running, as `agents
doctor --repair` would. Either way the command says how to go on and exits 130, the shell's
code for an interrupted command. An Apply cannot be paused: the first Ctrl+C says so.

Git runs in its own process group (sandbox/git/process.py), so the terminal's Ctrl+C, sent to
the whole foreground group, does not kill a checkpoint halfway.
"""

from __future__ import annotations

import getpass
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import click

from cleveragents_tui.cli.context import CLEAR_ROW, CliContext, echo
from cleveragents_tui.domain.errors import UserError

EXIT_INTERRUPTED = 130
AGAIN = "Ctrl+C again stops it at once"


class Interrupts:
    """What Ctrl+C does to the plans a command runs; :meth:`follow` names each as it starts
    (the one the command started or was given first, then the plans its run starts: child
    plans, an appended plan)."""

    def __init__(self, cli: CliContext) -> None:
        self._cli = cli
        self.plan_refs: list[str] = []
        self.pausing = threading.Event()  # the first Ctrl+C came, the pause was asked
        self._pauser: threading.Thread | None = None
        self._paused: str | None = None  # the plan the pause was recorded for

    def follow(self, plan_ref: str) -> None:
        if plan_ref not in self.plan_refs:
            self.plan_refs.append(plan_ref)

    def on_sigint(self, _signum: int, _frame: FrameType | None) -> None:
        if self.pausing.is_set() or not self.plan_refs:
            raise KeyboardInterrupt
        self.pausing.set()
        # the store is not used from a signal handler: the main thread may be inside it
        self._pauser = threading.Thread(target=self._pause, args=(self.plan_refs[0],), daemon=True)
        self._pauser.start()

    def _pause(self, plan_ref: str) -> None:
        """Pause the command's plan (its child plans with it; for an applied plan a
        correction appends to, the appended plan that runs). An Apply refuses: said."""
        from cleveragents_tui.engine.run.lifecycle import pause_run

        try:
            plan = pause_run(self._cli.store, plan_ref, by=getpass.getuser())
        except UserError as exc:
            echo(f"interrupted: {exc.problem} ({AGAIN})", err=True)
            return
        except Exception as exc:  # the store failing now: the run goes on as it was
            echo(f"interrupted: plan {plan_ref} could not be paused ({exc}; {AGAIN})", err=True)
            return
        self._paused = plan.plan_id
        if sys.stderr.isatty():  # over the "^C" and the row of what the plan waits on
            click.echo(CLEAR_ROW, nl=False, err=True)
        echo(
            f"interrupted: plan {plan.plan_id} pauses after its current step ({AGAIN})",
            err=True,
        )

    def paused(self) -> None:
        """After a run the first Ctrl+C paused (once the pause is recorded): how to go on;
        exits 130. Nothing when the pause was refused (an Apply): the command ends as it
        would have."""
        if self._pauser is not None:
            self._pauser.join()
        if self._paused is not None:
            _stopped(self._cli, self._paused, "paused after its current step")

    def stopped(self) -> None:
        """After a run a Ctrl+C stopped at once (the runner's lease is released): each plan
        it followed marked paused if it was left running; how to go on; exits 130."""
        if not self.plan_refs:
            echo("stopped: no plan was started", err=True)
            sys.exit(EXIT_INTERRUPTED)
        from cleveragents_tui.engine.run.lifecycle import pause_stopped_run

        for plan_ref in self.plan_refs:
            pause_stopped_run(self._cli.store, plan_ref)
        _stopped(self._cli, self._open_plan(), "stopped at its last recorded step")

    def _open_plan(self) -> str:
        """The first plan followed that is still open (not the applied plan an append
        started from); the first one when none is."""
        with self._cli.store.unit_of_work() as uow:
            for plan_ref in self.plan_refs:
                if not uow.plans.get(uow.plans.resolve(plan_ref)).state.is_terminal:
                    return plan_ref
        return self.plan_refs[0]

    @staticmethod
    def exit_at_once() -> None:
        """Python's exit waits for every thread; a child plan's run left under way (a model
        call, say) would hold the command until it ends. Its step is crash-safe: exit as a
        crash would, what was printed flushed."""
        from cleveragents_tui.engine.run.children import still_running

        if still_running():
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)


def _stopped(cli: CliContext, plan_ref: str, how: str) -> None:
    from cleveragents_tui.cli.render import plan_heading
    from cleveragents_tui.domain.enums import PlanState

    with cli.store.unit_of_work() as uow:
        plan = uow.plans.get(uow.plans.resolve(plan_ref))
    echo(plan_heading(plan), err=True)
    if plan.state in (
        PlanState.PAUSED,
        PlanState.RUNNING,
        PlanState.ERRORED,
        PlanState.CONSTRAINED,
    ):
        echo(f"{how}: go on with agents plan run {plan.plan_id}", err=True)
    sys.exit(EXIT_INTERRUPTED)


@contextmanager
def pausing_on_ctrl_c(cli: CliContext) -> Iterator[Interrupts]:
    """Ctrl+C as above while the block runs a plan (main thread only: a signal handler can
    only be set there; elsewhere Ctrl+C keeps Python's default). A process started with
    SIGINT ignored (``nohup``, a shell's background job) keeps ignoring it."""
    interrupts = Interrupts(cli)
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    ):
        yield interrupts
        return
    before = signal.signal(signal.SIGINT, interrupts.on_sigint)
    try:
        yield interrupts
    except KeyboardInterrupt:
        try:
            interrupts.stopped()  # a Ctrl+C meanwhile raises: the handler's second one does
        finally:
            interrupts.exit_at_once()
    finally:
        signal.signal(signal.SIGINT, before)
    if interrupts.pausing.is_set():
        interrupts.paused()
