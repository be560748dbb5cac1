"""The plan screen's controls: pause, cancel, resume or retry, apply, each run in a thread
(a resume or an apply runs the plan); resuming a plan paused on a denial offers its choices."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual import work

from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine import apply_plan, cancel_plan, pause_run, resume_plan
from cleveragents_tui.engine.run.children import landing_parent
from cleveragents_tui.engine.run.denial import paused_denial
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.messages import StoreChanged
from cleveragents_tui.tui.modals.confirm import ConfirmModal
from cleveragents_tui.tui.screens.after_denial import AfterDenial
from cleveragents_tui.tui.screens.plan_base import PlanScreenBase
from cleveragents_tui.tui.services import services


class PlanControls(PlanScreenBase, AfterDenial):
    """`P` `X` `R` `A` on the plan screen."""

    @work(thread=True, group="control-run", exit_on_error=False)
    def _control(self, name: str, fn: Callable[[Store, str, str], Plan]) -> None:
        try:
            plan = fn(self.store, self.plan_id, services(self).user)  # by whom, for the log
        except UserError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        which = "plan" if plan.plan_id == self.plan_id else f"its appended plan {plan.plan_id}"
        self.app.call_from_thread(self.notify, f"{which} {name}: {plan.state.value}")
        self.post_message(StoreChanged())

    def action_pause(self) -> None:
        self._control("paused", pause_run)  # an applied plan's: its appended plan that runs

    @work(exclusive=True, group="control", exit_on_error=False)
    async def action_cancel_plan(self) -> None:
        if self._said_closed("it cannot be cancelled"):
            return
        if await self.app.push_screen_wait(
            ConfirmModal(
                f"Cancel plan {self.plan_id} and its open child plans? Cancelling lands "
                "nothing (the sandboxes stay until discarded); it cannot be undone.",
                title="Cancel plan",
                yes="Cancel the plan",
            )
        ):
            self._control("cancelled", cancel_plan)

    def _said_running(self) -> bool:
        """One run of the plan at a time from this app: a second `R` or `A` while the first
        still runs is refused, saying so (the engine would refuse it too, and the app lost
        track of the first run, which quitting then neither paused nor waited for)."""
        run = services(self).engine_run_on(self.plan_id)
        if run is None:
            return False
        then = "wait for it or pause it (P)" if run.pause else "wait for it to land"
        self.notify(f"{run.what} is already going on this plan: {then}", severity="warning")
        return True

    @work(exclusive=True, group="control", exit_on_error=False)
    async def action_resume(self) -> None:
        """A plan paused on a denial offers the denial's choices again (asking again is one
        of them); any other runs on."""
        if self._said_running():
            return
        if self.plan is not None and self.plan.state is PlanState.PAUSED:
            denial = await asyncio.to_thread(paused_denial, self.store, self.plan_id)
            if denial is not None:
                await self.offer_choices(denial)
                return
        self.notify("running the plan…")
        services(self).engine_started(self._run_in_thread("resume"), "a plan run", self.plan_id)

    @work(exclusive=True, group="control", exit_on_error=False)
    async def action_apply(self) -> None:
        if self._said_closed("there is nothing to apply") or self._said_running():
            return
        if await self.app.push_screen_wait(
            ConfirmModal(
                "Approve the Apply gate and land the changes on the real resources?",
                title="Apply plan",
                yes="Apply",
            )
        ):
            worker = self._run_in_thread("apply")
            services(self).engine_started(worker, "an Apply", self.plan_id, pause=False)

    @work(thread=True, group="run", exit_on_error=False)  # never exclusive: see _said_running
    def _run_in_thread(self, what: str) -> None:
        app = services(self)
        try:
            if what == "apply":
                plan = apply_plan(self.store, self.plan_id, app.user, app.run_options)
            else:
                plan = resume_plan(self.store, self.plan_id, app.run_options)
        except UserError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        said = f"plan {plan.phase.value} · {plan.state.value}"
        if (lands_with := landing_parent(self.store, plan)) is not None:
            said += f"; it lands with its parent plan: run plan {lands_with}"
        self.app.call_from_thread(self.notify, said)
        self.post_message(StoreChanged())
