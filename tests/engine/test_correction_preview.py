"""Preview warnings and tier errors, worded as the specification words them."""

from __future__ import annotations

import pytest

from cleveragents_tui.domain.enums import CorrectionMode
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.core.checkpoints import store_execute_decision
from cleveragents_tui.engine.correct.model import CorrectionRefusedError, Tier
from cleveragents_tui.engine.correct.preview import preview
from tests.engine.conftest import API, GIT, World


def test_non_rollbackable_resources_are_warned_about(world: World) -> None:
    world.sandboxes.note_write(API)
    world.write_file(GIT, "src/app.py", "v2\n")
    decision = world.decision("call the api")
    store_execute_decision(world.sandboxes, decision)
    with world.store.unit_of_work(write=True) as uow:  # a plan that can be replayed
        uow.plan_actions.save(
            world.plan.plan_id, {"name": "local/x", "prompt": "p", "resources": [GIT, API]}
        )
        uow.commit()
    impact = preview(world.store, decision.decision_id, CorrectionMode.REVERT, "do not call it")
    assert impact.tier is Tier.FULL
    assert impact.non_rollbackable == (API,)
    assert GIT in impact.rollbackable
    assert impact.warnings[0] == (
        "WARNING: The following resources cannot be rolled back (sandbox strategy: none):\n"
        f"  - {API}\n\nResource changes since this decision will persist.\n"
        "Proceed with rollback of other resources?"
    )


def test_checkpointing_disabled_gives_the_phase_level_tier_error(world: World) -> None:
    world.write_file(GIT, "src/app.py", "v2\n")
    decision = world.decision("edit")
    store_execute_decision(world.sandboxes, decision)
    unchecked = Resource(
        resource_id="local/unchecked",
        kind="filesystem",
        location=str(world.base),
        sandbox_strategy="filesystem_copy",
        checkpoint_enabled=False,
    )
    with world.store.unit_of_work(write=True) as uow:
        uow.resources.add(unchecked)
        uow.plan_actions.save(
            world.plan.plan_id,
            {"name": "local/x", "prompt": "p", "resources": [GIT, "local/unchecked"]},
        )
        uow.commit()
    with pytest.raises(CorrectionRefusedError) as refused:
        preview(world.store, decision.decision_id, CorrectionMode.REVERT, "use async")
    message = str(refused.value)
    assert message.startswith(
        f"Decision {decision.decision_id} was made during Execute, but checkpointing "
        "is disabled for this plan. Fine-grained rollback is not available"
    )
    assert (
        "revert to Strategize: agents plan correct <strategize_decision_id> --mode=revert"
        in message
    )
    assert f"agents plan correct {decision.decision_id} --mode=append" in message
    assert "re-run with checkpointing" in message


def test_a_superseded_or_root_decision_and_empty_guidance_are_refused(world: World) -> None:
    with pytest.raises(CorrectionRefusedError, match="prompt_definition"):
        preview(world.store, world.root.decision_id, CorrectionMode.REVERT, "x")
    with pytest.raises(CorrectionRefusedError, match="guidance is empty"):
        preview(world.store, world.root.decision_id, CorrectionMode.REVERT, "  ")


def test_a_plan_without_a_valid_stored_action_is_refused_up_front(world: World) -> None:
    decision = world.decision("edit")
    store_execute_decision(world.sandboxes, decision)
    with pytest.raises(CorrectionRefusedError, match="it has no stored action to replay"):
        preview(world.store, decision.decision_id, CorrectionMode.APPEND, "x")
    with world.store.unit_of_work(write=True) as uow:
        uow.plan_actions.save(world.plan.plan_id, {"name": "local/x"})  # no prompt: invalid
        uow.commit()
    with pytest.raises(CorrectionRefusedError, match=r"cannot be run again \(1 error\)"):
        preview(world.store, decision.decision_id, CorrectionMode.REVERT, "x")
    with world.store.unit_of_work() as uow:
        assert uow.corrections.for_plan(world.plan.plan_id) == []


def test_a_plan_whose_profile_is_gone_is_refused_up_front(world: World) -> None:
    decision = world.decision("edit")
    store_execute_decision(world.sandboxes, decision)
    with world.store.unit_of_work(write=True) as uow:
        uow.plan_actions.save(world.plan.plan_id, {"name": "local/x", "prompt": "p"})
        plan = uow.plans.get(world.plan.plan_id)
        uow.plans.save(plan.model_copy(update={"automation_profile": "gone"}))
        uow.commit()
    with pytest.raises(CorrectionRefusedError, match="cannot be run again") as refused:
        preview(world.store, decision.decision_id, CorrectionMode.REVERT, "x")
    assert "gone" in str(refused.value)
