"""The plan screen's settings: its automation profile (`p`) and its chat model (`m`), as
`agents plan set-profile` and `plan set-model` change them. A model error names the latter:
here it is answered without leaving the app. Reads and changes run in threads."""

from __future__ import annotations

import asyncio

from textual import work

from cleveragents_tui.automation.profiles import ProfileRegistry
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.profile import AutomationProfile
from cleveragents_tui.engine.core.reasoner_choice import for_plan
from cleveragents_tui.engine.run.model_change import change_model
from cleveragents_tui.engine.run.plans import change_profile
from cleveragents_tui.tui.messages import StoreChanged
from cleveragents_tui.tui.modals.model import ModelChange, ModelModal
from cleveragents_tui.tui.modals.pick import PickModal
from cleveragents_tui.tui.screens.plan_base import PlanScreenBase
from cleveragents_tui.tui.services import services
from cleveragents_tui.views.lines import one_line

NOTHING_TO_CHANGE = "it runs no more, so nothing to change"


def _profile_label(profile: AutomationProfile, current: str) -> str:
    """``cautious  (now)  Strategize automatic above 0.8 …``: the name, then the first
    sentence of its description on what is left of one row."""
    now = "  (now)" if profile.name == current else ""
    first = profile.description.split(". ")[0]
    return f"{profile.name}{now}  " + one_line(first, max(20, 64 - len(profile.name) - len(now)))


class PlanSettings(PlanScreenBase):
    """`p` and `m` on the plan screen."""

    @work(exclusive=True, group="control", exit_on_error=False)
    async def action_set_profile(self) -> None:
        if self.plan is None or self._said_closed(NOTHING_TO_CHANGE):
            return
        profiles = await asyncio.to_thread(ProfileRegistry(self.store).all)
        picked = await self.app.push_screen_wait(
            PickModal(
                f"Automation profile of plan {self.plan_id[:10]}",
                "From the plan's next step on; child plans spawned from now on inherit it. "
                "Enter to pick, Esc to cancel.",
                [(p.name, _profile_label(p, self.plan.automation_profile)) for p in profiles],
                self.plan.automation_profile,
            )
        )
        if picked is not None and picked != self.plan.automation_profile:
            self._set_profile(picked)

    @work(thread=True, group="control-run", exit_on_error=False)
    def _set_profile(self, name: str) -> None:
        try:
            plan = change_profile(self.store, self.plan_id, name)
        except UserError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        said = f"profile {plan.automation_profile} from the plan's next step on"
        self.app.call_from_thread(self.notify, said)
        self.post_message(StoreChanged())

    @work(exclusive=True, group="control", exit_on_error=False)
    async def action_set_model(self) -> None:
        if self.plan is None or self._said_closed(NOTHING_TO_CHANGE):
            return
        choice = await asyncio.to_thread(for_plan, self.store, self.plan_id)
        if choice is None:
            self.notify(
                f"plan {self.plan_id} runs with the scripted reasoner, which asks no model: "
                "start a new plan with one (agents plan use ACTION --model PROVIDER:MODEL)",
                severity="error",
            )
            return
        change = await self.app.push_screen_wait(
            ModelModal(self.plan_id, choice.model, choice.base_url)
        )
        if change is not None:
            self._set_model(change)

    @work(thread=True, group="control-run", exit_on_error=False)
    def _set_model(self, change: ModelChange) -> None:
        model, base_url = change
        try:
            _, kept = change_model(
                self.store, self.plan_id, model=model, base_url=base_url, by=services(self).user
            )
        except UserError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        at = f" at {kept.base_url}" if kept.base_url else ""
        self.app.call_from_thread(self.notify, f"model {kept.model}{at}, from its next run on")
        self.post_message(StoreChanged())
