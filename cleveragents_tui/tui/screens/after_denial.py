"""What comes after a denial, picked in the app: right after `n` on the approvals screen, and
again with `R` on a plan still paused on it (engine/run/denial.py). The choice is carried
out in a worker; the event loop never waits on the engine."""

from __future__ import annotations

from textual import work

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine import apply_plan, cancel_plan, resume_plan
from cleveragents_tui.engine.run.denial import Denial
from cleveragents_tui.engine.run.lifecycle import resume_with
from cleveragents_tui.tui.messages import StoreChanged
from cleveragents_tui.tui.modals.denial import (
    APPLY,
    CANCEL,
    CHOOSE,
    CORRECT,
    GUIDANCE,
    OPENS_THE_PLAN,
    DenialModal,
)
from cleveragents_tui.tui.modals.reason import ReasonModal
from cleveragents_tui.tui.screens.base import AgentsScreen
from cleveragents_tui.tui.services import services


class AfterDenial(AgentsScreen):
    """:meth:`offer_choices` asks what comes next and carries it out."""

    async def offer_choices(self, denial: Denial) -> None:
        choice = await self.app.push_screen_wait(DenialModal(denial, self.correct_how(denial)))
        plan_id = denial.plan.plan_id
        if choice is None:
            self.notify(f"denied; plan {plan_id[:10]} stays paused")
            return
        guidance = None
        if choice == GUIDANCE:
            guidance = await self.app.push_screen_wait(ReasonModal("Guidance for this decision"))
            if not guidance:
                return
        if choice == CORRECT:
            self.on_correct_chosen(denial)
            return
        applying = choice == APPLY
        services(self).engine_started(
            self._carry_out(plan_id, choice, guidance),
            "an Apply" if applying else "a plan run",
            plan_id,
            pause=not applying,
        )

    def correct_how(self, denial: Denial) -> str:
        """The correct choice's words: what picking it does here."""
        return OPENS_THE_PLAN

    def on_correct_chosen(self, denial: Denial) -> None:
        """A correction is made on the plan's screen: the approvals screen opens it, the
        plan's screen selects the decision that made a failed call."""
        self.notify("select the decision whose result was wrong and press c to correct it")

    # Never exclusive: a second choice (on another plan) would cancel this worker, which
    # runs on regardless, and the app would lose track of it for quitting.
    @work(thread=True, group="run", exit_on_error=False)
    def _carry_out(self, plan_id: str, choice: str, guidance: str | None) -> None:
        app = services(self)
        try:
            if choice == CANCEL:
                plan = cancel_plan(app.store, plan_id, app.user)
            elif choice == APPLY:
                plan = apply_plan(app.store, plan_id, app.user, app.run_options)
            elif choice.startswith(CHOOSE) or choice == GUIDANCE:
                number = int(choice.removeprefix(CHOOSE)) if choice != GUIDANCE else None
                plan = resume_with(
                    app.store, plan_id, choose=number, guidance=guidance, options=app.run_options
                )
            else:
                plan = resume_plan(app.store, plan_id, app.run_options)
        except UserError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.app.call_from_thread(
            self.notify, f"plan {plan_id[:10]}: {plan.phase.value} · {plan.state.value}"
        )
        self.post_message(StoreChanged())
