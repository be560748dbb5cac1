"""`agents plan set-model`: point an open plan at another model or server.

A plan keeps the chat model and base URL it started with, so that later runs and a
correction's replay ask the same model at the same server. A local server that moved (a
new port, another host) then left every later run failing to connect, and the only way on
was a new plan, which loses the work. This is the explicit change, as `plan set-profile` is
for the profile: checked as `plan use` checks a model, recorded in the log, in effect from
the plan's next run (a run under way keeps the model it started with). Child and appended
plans that ask their parent's model follow.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.engine.core.reasoner_choice import (
    ModelChoice,
    check_base_url,
    check_ready,
    keep_choice,
    kept_choice,
    parse_model,
)
from cleveragents_tui.store.store import Store


def change_model(
    store: Store,
    plan_ref: str,
    *,
    model: str | None = None,
    base_url: str | None = None,
    by: str | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[Plan, ModelChoice]:
    """Keep ``model`` and/or ``base_url`` with the plan instead of what it runs with now;
    returns the plan and the choice kept. Refused, with nothing changed, for a plan that is
    closed or runs with the scripted reasoner, or a model that is not ready."""
    if model is None and base_url is None:
        raise UserError(
            "nothing to change",
            "give the model (PROVIDER:MODEL), --base-url URL, or both",
        )
    env = os.environ if env is None else env
    with store.unit_of_work(write=True) as uow:
        plan = uow.plans.get(uow.plans.resolve(plan_ref))
        if plan.state.is_terminal:
            raise UserError(
                f"plan {plan.plan_id} is {plan.state.value}: it asks no model any more",
                "change the model of a plan that is still open (`agents plan list`)",
            )
        was = kept_choice(uow, plan.plan_id)
        if was is None:
            raise UserError(
                f"plan {plan.plan_id} runs with the scripted reasoner, which asks no model",
                "start a new plan with one: agents plan use ACTION --model PROVIDER:MODEL",
            )
        choice = ModelChoice(
            parse_model(model) if model is not None else was.model,
            check_base_url(base_url) if base_url is not None else was.base_url,
        )
        check_ready(choice, env)
        keep_choice(uow, plan.plan_id, choice)
        uow.events.append(
            "model_changed",
            {"from": was.as_json(), "to": choice.as_json()},
            plan_id=plan.plan_id,
            actor=by,
        )
        uow.commit()
    return plan, choice
