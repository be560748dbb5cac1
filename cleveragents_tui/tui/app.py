"""The agents app: plans, decision trees, corrections, diffs, approvals (issue 7).

It calls the engine services only (DESIGN.md section 2). Blocking engine work (a correction,
a resume, an apply) runs in thread workers, which post messages back; the store is polled
every :attr:`AgentsApp.poll_seconds` so changes made by other processes show up.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import getpass
from pathlib import Path
from typing import Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.events import Resize
from textual.notifications import SeverityLevel
from textual.worker import Worker, WorkerCancelled, WorkerFailed

from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine import RunOptions
from cleveragents_tui.engine.read import tui_queries
from cleveragents_tui.engine.setup.config import THEME_KEY, set_setting
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.commands import AgentsCommands
from cleveragents_tui.tui.messages import StoreChanged
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.screens.plan_list import PlanListScreen
from cleveragents_tui.tui.services import EngineRun

NARROW = 100  # below this width the details go under the tree


def quit_question(runs: list[EngineRun]) -> str:
    running = "; ".join(
        f"{r.what} on plan {r.plan_id}" + ("" if r.pause else " (it lands to the end first)")
        for r in runs
    )
    plans = dict.fromkeys(r.plan_id for r in runs)
    resume = ", ".join(f"`agents plan run {plan_id}`" for plan_id in plans)
    return (
        f"Still running: {running}. Quit anyway? The plan is paused first: the work stops at "
        f"its next safe point (before its next decision; a rollback under way finishes), "
        f"then the app quits. Resume it later with {resume} (or R here)."
    )


class AgentsApp(App[None]):
    """The app. Every notification is plain text with its control characters escaped: its
    messages quote errors, ids and paths that came from users, agents and files."""

    CSS_PATH = Path(__file__).with_name("app.tcss")
    TITLE = "cleveragents"
    COMMANDS = App.COMMANDS | {AgentsCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", id="app.quit"),
        Binding("question_mark", "help", "Help", id="app.help"),
        Binding("a", "approvals", "Approvals", id="app.approvals"),
        Binding("t", "toggle_theme", "Light/dark", id="app.theme"),
        Binding("f5", "refresh_store", "Refresh", id="app.refresh", show=False),
    ]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Never markup (an error quoting ``[x]`` would be styled or fail), never a raw
        escape sequence."""
        super().notify(
            printable(message),
            title=printable(title, one_line=True),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def action_help_quit(self) -> None:
        """Ctrl+C: Textual's own note names the quit key in markup (``[b]q[/b]``), which this
        app's notifications show as written."""
        self.notify("Press q to quit the app", title="Do you want to quit?")

    def __init__(
        self,
        store: Store,
        *,
        plan_id: str | None = None,
        user: str | None = None,
        run_options: RunOptions | None = None,
        poll_seconds: float | None = 2.0,
        theme: str = "dark",
    ) -> None:
        super().__init__()
        self.store = store
        self.initial_plan = plan_id
        self.user = user or getpass.getuser()
        self.run_options = run_options or RunOptions(user=self.user)  # events name who acted
        self.poll_seconds = poll_seconds
        self._fingerprint: tuple[object, ...] | None = None
        self.initial_theme = theme
        self._engine_runs: list[EngineRun] = []
        self._asking_quit = False
        self.quitting: Worker[None] | None = None  # pausing the engine's work, then quits

    def on_mount(self) -> None:
        self.theme = f"textual-{self.initial_theme}"
        self.poll_store(announce=False)  # the first reading: the screens load their own data
        if self.initial_plan:  # the list comes when the plan is left (see leave_plan)
            self.open_plan(self.initial_plan)
        else:
            self.push_screen(PlanListScreen())
        if self.poll_seconds:
            self.set_interval(self.poll_seconds, self.poll_store)

    def on_resize(self, event: Resize) -> None:
        self.set_class(event.size.width < NARROW, "-narrow")

    # -- live refresh -------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False)
    def poll_store(self, announce: bool = True) -> None:
        """Read the store's fingerprint in a thread (the event loop never waits on the
        database); the screens refresh if it changed (another process, or this one) —
        unless ``announce`` is False: the first reading, while the screens load anyway."""
        try:
            current = tui_queries.fingerprint(self.store)
        except Exception as exc:  # the database went away: say so, keep polling
            self.call_from_thread(self.notify, f"cannot read the store: {exc}", severity="error")
            return
        self.call_from_thread(self.store_fingerprint, current, announce)

    def store_fingerprint(self, current: tuple[object, ...], announce: bool = True) -> bool:
        """On the event loop: tell the screens to refresh if ``current`` differs."""
        if current == self._fingerprint:
            return False
        self._fingerprint = current
        if not announce:
            return False
        # Only the topmost full screen (a dialog's own screen shows behind it): those under
        # it reload when shown again, and a message to a screen under the one shown woke it
        # to repaint the whole terminal at each poll (Textual repaints a screen's background
        # screens with it).
        top = next((s for s in reversed(self.screen_stack) if not s.is_modal), None)
        if top is not None:
            top.post_message(StoreChanged())
        return True

    def compact_heap(self) -> None:
        """Move every live object out of the cycle collector's sight (``gc.freeze``, which
        costs nothing). Called after each load of a plan: a full collection otherwise walks
        the ~200k long-lived objects (Textual, the tree, the rows of the last reload) and
        stops every thread for 0.1-0.8 s on a loaded machine — the loop's longest stall
        (docs/benchmarks.md). Rows dropped by the next reload are still freed (they hold no
        cycles); collecting before freezing cost as much, right before the first paint."""
        gc.freeze()

    def thaw_heap(self) -> None:
        """When a plan screen closes: hand what was frozen back to the collector, so the
        closed screen's objects are reclaimed."""
        gc.unfreeze()

    # -- quitting while the engine works ------------------------------------------------------

    def engine_started(
        self, worker: Worker[Any], what: str, plan_id: str, *, pause: bool = True
    ) -> None:
        """A screen started engine work in a thread (``what`` on ``plan_id``): quitting
        stops it first (see :meth:`action_quit`)."""
        self._engine_runs = [*self.engine_runs(), EngineRun(worker, what, plan_id, pause)]

    def engine_runs(self) -> list[EngineRun]:
        """The engine work still running in this process."""
        self._engine_runs = [r for r in self._engine_runs if not r.worker.is_finished]
        return self._engine_runs

    def engine_run_on(self, plan_id: str) -> EngineRun | None:
        """The engine work running on ``plan_id`` in this process, if any."""
        return next((r for r in self.engine_runs() if r.plan_id == plan_id), None)

    async def action_quit(self) -> None:
        """`q`, `ctrl+q`, the palette's Quit. Engine work running in a thread of this
        process would go on behind a closed window (the process ends only when it does):
        ask first, then pause its plan and quit once it stopped at its next safe point."""
        if self.quitting is not None:
            self.notify("quitting once the plan's work has stopped at its next safe point…")
        elif not self.engine_runs():
            self.exit()
        elif not self._asking_quit:
            self._ask_quit()

    @work(group="quit", exit_on_error=False)
    async def _ask_quit(self) -> None:
        self._asking_quit = True
        try:
            go = await self.push_screen_wait(
                ConfirmModal(quit_question(self.engine_runs()), title="Quit", yes="Pause and quit")
            )
        finally:
            self._asking_quit = False
        if go:
            self.quitting = self._stop_then_exit()

    @work(group="quit", exit_on_error=False)
    async def _stop_then_exit(self) -> None:
        """Pause each plan whose work runs (the runner checks between steps; a pause asked
        during a correction's rollback holds too: its replay stops at once), and quit once
        every run has returned."""
        from cleveragents_tui.engine import pause_run  # the runner: a tab loads it when used

        self.notify("pausing: the app quits once the work has stopped at its next safe point…")
        runs = self.engine_runs()
        for plan_id in {r.plan_id for r in runs if r.pause}:
            try:
                await asyncio.to_thread(pause_run, self.store, plan_id, self.user)
            except UserError:
                pass  # paused already, or ended: the run stops anyway
            except Exception as exc:  # the database went away: the run stops on its own
                self.notify(f"cannot pause plan {plan_id}: {exc}", severity="error")
        for run in runs:
            with contextlib.suppress(WorkerCancelled, WorkerFailed):  # reported by its screen
                await run.worker.wait()
        self.exit()

    def action_refresh_store(self) -> None:
        self._fingerprint = None
        self.poll_store()

    # -- navigation ---------------------------------------------------------------------------

    # The other screens are imported when first opened: a browser tab paints the plan list
    # sooner (docs/benchmarks.md, "serve").

    def open_plan(self, plan_id: str) -> None:
        from cleveragents_tui.tui.screens.plan_view import PlanScreen

        self.push_screen(PlanScreen(plan_id))

    def action_leave_plan(self) -> None:
        self.leave_plan()

    def leave_plan(self) -> None:
        """Back from a plan: to the screen under it (the list, or the plan whose decision
        spawned it), or to a new plan list when the app opened on this plan."""
        if len(self.screen_stack) > 2:
            self.pop_screen()
        else:
            self.switch_screen(PlanListScreen())

    def open_diff(self, correction_id: str) -> None:
        from cleveragents_tui.tui.screens.diff import DiffScreen

        self.push_screen(DiffScreen(correction_id))

    def action_approvals(self) -> None:
        from cleveragents_tui.tui.screens.approvals import ApprovalsScreen

        if not isinstance(self.screen, ApprovalsScreen):
            self.push_screen(ApprovalsScreen())

    def action_help(self) -> None:
        from cleveragents_tui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_toggle_theme(self) -> None:
        light = self.current_theme.dark
        self.theme = "textual-light" if light else "textual-dark"
        from cleveragents_tui.tui.screens.diff import DiffScreen

        if isinstance(self.screen, DiffScreen):
            self.screen.render_diff()
        self._keep_theme("light" if light else "dark")

    @work(thread=True, exclusive=True, group="theme", exit_on_error=False)
    def _keep_theme(self, theme: str) -> None:
        """The next `agents tui` (and each browser tab of `agents serve`) opens with it."""
        try:
            set_setting(self.store, THEME_KEY, theme)
        except Exception as exc:  # a read-only store: the theme still changed for this run
            self.call_from_thread(self.notify, f"theme not kept: {exc}", severity="warning")


def run_app(
    store: Store, plan_id: str | None = None, user: str | None = None, theme: str = "dark"
) -> None:
    AgentsApp(store, plan_id=plan_id, user=user, theme=theme).run()
