"""The plan screen's corrections: `C` lists them as `agents plan show` does, a failed one
with its reason; Enter opens a finished one's diff (`d` opens the selected decision's, or
the latest) or, for one that did not finish, shows its decision and why. Nothing else in
the app says that a correction failed, nor why."""

from __future__ import annotations

import asyncio

from textual import work

from cleveragents_tui.domain.enums import CorrectionStatus, PlanState
from cleveragents_tui.engine import show_plan
from cleveragents_tui.tui.modals.pick import PickModal
from cleveragents_tui.tui.screens.plan_base import PlanScreenBase
from cleveragents_tui.tui.services import services
from cleveragents_tui.tui.widgets.decision_tree import DecisionTree
from cleveragents_tui.views.corrections import correction_line, why_failed


class PlanHistory(PlanScreenBase):
    """`C` and `d` on the plan screen."""

    @work(exclusive=True, group="diff", exit_on_error=False)
    async def action_diff(self) -> None:
        details = await asyncio.to_thread(show_plan, self.store, self.plan_id)
        done = [c for c in details.corrections if c.status is CorrectionStatus.SUCCEEDED]
        if not done:
            self.notify("this plan has no finished correction to compare", severity="warning")
            return
        current = self.query_one(DecisionTree).current
        pick = next(
            (c for c in done if current in (c.replacement_decision_id, c.target_decision_id)),
            done[-1],
        )
        services(self).open_diff(pick.correction_id)

    @work(exclusive=True, group="control", exit_on_error=False)
    async def action_corrections(self) -> None:
        details = await asyncio.to_thread(show_plan, self.store, self.plan_id)
        if not details.corrections:
            self.notify(
                "this plan has no correction yet: c on a decision corrects it",
                severity="warning",
            )
            return
        went_on = details.summary.plan.state is not PlanState.ERRORED
        newest_first = list(reversed(details.corrections))
        picked = await self.app.push_screen_wait(
            PickModal(
                f"Corrections of plan {self.plan_id[:10]}",
                "Newest first. Enter: a finished one's diff, or a failed one's decision and "
                "why it failed; Esc to close.",
                [(c.correction_id, correction_line(c, went_on)) for c in newest_first],
                None,
            )
        )
        chosen = next((c for c in newest_first if c.correction_id == picked), None)
        if chosen is None:
            return
        if chosen.status is CorrectionStatus.SUCCEEDED:
            services(self).open_diff(chosen.correction_id)
            return
        tree = self.query_one(DecisionTree)  # the correction's decision, else the one corrected
        for shown in (chosen.replacement_decision_id, chosen.target_decision_id):
            if shown is not None and tree.reveal(shown):
                break
        said = why_failed(chosen, went_on).removeprefix(": ")
        self.notify(
            f"correction {chosen.correction_id} {chosen.status.value}"
            + (f": {said}" if said else ""),
            severity="warning" if chosen.status is CorrectionStatus.FAILED else "information",
        )
