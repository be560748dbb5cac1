"""What the plan screen's parts (its export, its controls) share: the plan shown, whether
superseded decisions are, and the store."""

from __future__ import annotations

from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.screens.base import AgentsScreen
from cleveragents_tui.tui.services import services


class PlanScreenBase(AgentsScreen):
    def __init__(self, plan_id: str) -> None:
        super().__init__()
        self.plan_id = plan_id
        self.show_superseded = False
        self.plan: Plan | None = None  # as last read: None until the first load

    @property
    def store(self) -> Store:
        return services(self).store

    def _said_closed(self, why: str) -> bool:
        """An applied or cancelled plan stays so: say at once ``why`` nothing can be done,
        rather than ask to confirm (or to pick) what the engine then refuses (the
        confirmation read "Nothing is applied" on an applied plan)."""
        plan = self.plan
        if plan is None or not plan.state.is_terminal:
            return False
        self.notify(f"plan {plan.plan_id} is {plan.state.value}: {why}", severity="error")
        return True
