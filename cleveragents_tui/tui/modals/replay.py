"""The correction running: execute() in a thread worker, live progress read from the store,
and a cancel that pauses the plan (the runner stops before its next decision). Every read
and write of the store runs in a thread: the event loop never waits on the database."""

from __future__ import annotations

import textwrap
import threading
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Button, Log, Static
from textual.worker import Worker, WorkerState

from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine import (
    CorrectionResult,
    Impact,
    OutsideChoice,
    RunOptions,
    execute,
    pause_run,
)
from cleveragents_tui.engine.read import tui_queries
from cleveragents_tui.engine.read.run_progress import CallCursor
from cleveragents_tui.engine.read.tui_queries import CallView, EventView, Progress
from cleveragents_tui.engine.run import run_lease
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.messages import ProgressFailed, ProgressRead
from cleveragents_tui.tui.modals.base import Dialog
from cleveragents_tui.tui.render import safe_text
from cleveragents_tui.tui.services import services
from cleveragents_tui.views.progress import (
    SAID_BY_A_CALL,
    call_line,
    event_line,
    plan_wait_text,
)


class ReplayModal(Dialog[str | None]):
    """Dismisses with the correction id (to open its diff) or None."""

    DEFAULT_CSS = """
    ReplayModal > Vertical { width: 100; max-width: 98%; height: 80%; padding: 0 1; }
    ReplayModal Log { height: 1fr; }
    ReplayModal #replay-status { height: auto; }
    ReplayModal Horizontal { margin-top: 0; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("x", "cancel_replay", "Cancel replay", id="replay.cancel"),
        Binding("d", "open_diff", "Open diff", id="replay.diff"),
        Binding("escape", "close", "Close", id="replay.close"),
    ]

    # The app's, taken when mounted, as every screen takes them (tui/services.py).
    store: Store
    user: str
    options: RunOptions | None

    def __init__(self, impact: Impact, outside: OutsideChoice | None = None) -> None:
        super().__init__("Correction running")
        self.impact = impact
        self.outside = outside  # keep or discard files changed outside the plan
        self.result: CorrectionResult | None = None
        self.error: str | None = None
        self.cancel_requested = False
        self.remade = 0  # decisions re-made so far by the replay
        self._since: int | None = None  # read by the correction's thread before it starts
        self._calls = CallCursor(0)  # the calls shown (set with _since, before the replay)
        self._worker: Worker[tuple[CorrectionResult, Progress]] | None = None
        self.pausing: Worker[None] | None = None  # the cancel's pause, in a thread
        # Another tab may correct the same plan at the same time: its events are in the
        # store too. Shown are those after a correction_started this dialog's worker made.
        self._worker_thread: int | None = None
        self._showing = False

    def compose_body(self) -> ComposeResult:
        yield Static("starting…", id="replay-status", markup=False)
        yield Log(id="replay-log", highlight=False)

    def buttons(self) -> list[Button]:
        return [
            Button("Cancel replay (x)", id="cancel", variant="error"),
            Button("Open diff (d)", id="diff", variant="primary", disabled=True),
            Button("Close (esc)", id="close", disabled=True),
        ]

    def on_mount(self) -> None:
        app = services(self)
        self.store = app.store
        self.user = app.user
        self.options = app.run_options
        self._log(f"correcting {self.impact.decision_id} ({self.impact.mode.value})")
        self._worker = self.run_worker(
            self._execute, thread=True, exit_on_error=False, name="correction"
        )
        app.engine_started(self._worker, "a correction's replay", self.impact.plan_id)
        self._timer = self.set_interval(0.25, self.refresh_progress)

    def _execute(self) -> tuple[CorrectionResult, Progress]:
        """The correction, then its last progress (read here, so the dialog's final lines
        follow every event of it)."""
        self._worker_thread = threading.get_ident()
        since, calls_from = tui_queries.progress_start(self.store, self.impact.plan_id)
        self._calls = CallCursor(calls_from)
        self._since = since  # last: the loop reads progress once it is set, the cursor too
        result = execute(
            self.store,
            self.impact,
            acknowledged=True,
            requested_by=self.user,
            options=self.options,
            outside=self.outside,
        )
        last = tui_queries.progress(
            self.store, self.impact.plan_id, self._since, self._calls.from_sequence
        )
        return result, last

    def _log(self, line: str, indent: str = "") -> None:
        """Write ``line`` wrapped to the log's width (a Log cuts long lines at its edge, and
        a failure reason is often longer than the window), its rest indented under it."""
        log = self.query_one(Log)
        width = max(20, (log.scrollable_content_region.width or 96) - 1)
        text = printable(line, one_line=True)
        wrapped = textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ")
        for part in wrapped:
            log.write_line(part)

    def _ours(self, event: EventView) -> bool | None:
        """Whether ``event`` belongs to this dialog's correction (see ``_showing``); None
        when a correction_started cannot be told yet: the correction's thread no longer
        holds the plan and its result has not arrived (it will, with these events)."""
        if event.kind == "correction_started":
            result = self.result
            if result is not None:
                self._showing = event.payload.get("correction_id") == (
                    result.correction.correction_id
                )
            else:
                thread = self._worker_thread
                if thread is None or not run_lease.held_by(
                    self.options.sandbox_base if self.options else None,
                    self.impact.plan_id,
                    thread,
                ):
                    return None
                self._showing = True
        return self._showing

    def refresh_progress(self) -> None:
        """Every 0.25 s while the correction runs: read its progress in a thread."""
        if self._since is not None and not self.finished:
            self._read_progress(self._since, self._calls.from_sequence)

    @work(thread=True, exclusive=True, group="progress", exit_on_error=False)
    def _read_progress(self, since: int, calls_from: int) -> None:
        try:
            p = tui_queries.progress(self.store, self.impact.plan_id, since, calls_from)
        except Exception as exc:  # the database went away: say so where the status is
            self.post_message(ProgressFailed(str(exc)))
            return
        self.post_message(ProgressRead(p))

    def on_progress_read(self, message: ProgressRead) -> None:
        if not self.finished:  # a reading that arrives after the result is older than it
            self._show_progress(message.progress)

    def on_progress_failed(self, message: ProgressFailed) -> None:
        if not self.finished:
            self.query_one("#replay-status", Static).update(
                f"cannot read the progress: {message.error}"
            )

    def _show_progress(self, p: Progress) -> None:
        """Log the events and tool calls of this correction not shown yet, in the order they
        happened, and the plan's status."""
        happened: list[EventView | CallView] = [*p.events, *p.calls]
        for item in sorted(happened, key=lambda h: h.created_at):  # stable: events in order
            if isinstance(item, CallView):
                self._show_call(item)
                continue
            if self._since is not None and item.event_id <= self._since:
                continue  # shown by an earlier reading
            ours = self._ours(item)
            if ours is None:
                break  # shown when the result arrives
            self._since = item.event_id
            if not ours:
                continue
            self.remade += item.kind == "decision_remade"
            if item.kind not in SAID_BY_A_CALL:
                self._log(event_line(item))
        status = Text()
        status.append(f"plan {p.phase} · {p.state} · attempt {p.attempt}   ")
        status.append(
            f"decisions: {p.current_decisions} current, {p.decisions - p.current_decisions} "
            f"superseded, {self.remade} re-made"
        )
        if waiting := plan_wait_text(self.impact.plan_id):  # in memory: no store read
            status.append(f"\n⋯ {waiting}", style="bold cyan")
        self.query_one("#replay-status", Static).update(safe_text(status))

    def _show_call(self, call: CallView) -> None:
        """A call of this correction's replay (the plan has one runner: while the dialog's
        correction runs, it), under the ``re-made`` line of its decision."""
        if self._showing and self._calls.take(call):
            self._log(call_line(call), indent="  ")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is not self._worker or not event.worker.is_finished:
            return
        self._timer.stop()
        title = self.query_one(".modal-title", Static)
        if event.state is WorkerState.SUCCESS:
            assert event.worker.result is not None
            result, last = event.worker.result
            assert isinstance(result, CorrectionResult)
            self.result = result
            self._show_progress(last)
            c = result.correction
            self._log(f"correction {c.correction_id}: {c.status.value} (attempt {c.attempt})")
            if result.report is not None:
                for r in result.report.resources:
                    self._log(
                        f"  resource {r.resource_id}: {r.outcome.value}"
                        + (f" ({r.detail})" if r.detail else "")
                    )
            if c.report.get("replay") == "failed" and c.appended_plan_id is not None:
                self._log(  # an append's plan is made, its run stopped
                    f"{c.report['error']}: the appended plan {c.appended_plan_id} stays; "
                    "open it and go on with R"
                )
            elif c.report.get("replay") == "failed":  # made, but its replay stopped
                self._log(f"{c.report['error']}: the decisions stay corrected; go on with R")
            self._log(f"plan is now {result.plan.phase.value} · {result.plan.state.value}")
            title.update(f"Correction {c.status.value}")
            self.query_one("#diff", Button).disabled = c.status.value != "succeeded"
        else:
            self.error = str(event.worker.error)
            self._log(f"failed: {self.error}")
            title.update("Correction failed")
            self.query_one("#replay-status", Static).update(
                "not carried out: the reason is below"
                if isinstance(event.worker.error, UserError)
                else "stopped by an error: `agents doctor` checks what it left"
            )
        self.query_one("#cancel", Button).disabled = True
        self.query_one("#close", Button).disabled = False
        self.query_one("#close", Button).focus()
        self.refresh_bindings()

    @property
    def worker(self) -> Worker[tuple[CorrectionResult, Progress]] | None:
        return self._worker

    @property
    def finished(self) -> bool:
        return self._worker is not None and self._worker.is_finished

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The footer offers only what can act now: cancel while the correction runs, the
        diff once it succeeded (hidden before; refreshed when it ends)."""
        if action == "cancel_replay":
            return not self.finished
        if action == "open_diff":
            return self.finished and self._succeeded()
        return True

    def _succeeded(self) -> bool:
        return self.result is not None and self.result.correction.status.value == "succeeded"

    def action_cancel_replay(self) -> None:
        if self.finished or (self.pausing is not None and self.pausing.is_running):
            return  # a second `x` while the pause is being written: one is enough
        self.cancel_requested = True
        self.pausing = self._pause()

    @work(thread=True, exclusive=True, group="pause", exit_on_error=False)
    def _pause(self) -> None:
        """Pause the plan in a thread; the runner stops before its next decision."""
        try:
            paused = pause_run(self.store, self.impact.plan_id, services(self).user)
            again = (  # the appended plan, when the corrected plan was applied
                "R"
                if paused.plan_id == self.impact.plan_id
                else f"agents plan run {paused.plan_id}"
            )
            line = (
                "cancel: plan paused; the replay stops before its next decision. What was "
                f"already rolled back and re-made stays (resume with {again}, or correct again)."
            )
        except UserError as exc:
            line = (
                f"cancel not possible right now ({exc}); the rollback step cannot be "
                "interrupted: try again in a moment"
            )
        except Exception as exc:  # the database went away: a notification
            self.app.call_from_thread(self.notify, f"cannot pause: {exc}", severity="error")
            return
        self.app.call_from_thread(self._log, line)

    def action_open_diff(self) -> None:
        if self.finished and self.result and self._succeeded():
            self.dismiss(self.result.correction.correction_id)

    def action_close(self) -> None:
        if self.finished:
            self.dismiss(None)
        else:
            self.notify("The correction is running: cancel it (x) or wait.", severity="warning")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        {
            "cancel": self.action_cancel_replay,
            "diff": self.action_open_diff,
            "close": self.action_close,
        }[event.button.id or "close"]()
