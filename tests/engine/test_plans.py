"""Plan creation: profile precedence, locking, inheritance; pre-flight first; limit breaches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.automation.precedence import ProfileSource
from cleveragents_tui.automation.preflight import PreflightError
from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.domain.tool import ToolSpec
from cleveragents_tui.engine.run.plans import change_profile, create_plan
from cleveragents_tui.engine.setup.config import set_setting, unset_setting
from cleveragents_tui.store.store import Store

TOOLS = {
    "local/write": ToolSpec(name="local/write", category="write", writes=True),
    "local/shell": ToolSpec(name="local/shell", category="command", checkpointable=False),
}
ACTORS = frozenset({"local/scripted"})


def action(**overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "local/greet",
        "prompt": "Greet",
        "project": "local/app",
        "tools": ["local/write"],
    }
    raw.update(overrides)
    return raw


def make(store: Store, raw: dict[str, Any] | None = None, **kwargs: Any):  # type: ignore[no-untyped-def]
    return create_plan(store, raw or action(), tools=TOOLS, actors=ACTORS, **kwargs)


def test_precedence_plan_over_action_over_project_over_global(sqlite_store: Store) -> None:
    store = sqlite_store
    assert make(store)[1].source is ProfileSource.DEFAULT
    assert make(store)[0].automation_profile == "manual"
    set_setting(store, "core.automation-profile", "review")
    assert make(store)[1].name == "review"
    set_setting(store, "core.automation-profile", "trusted", project="local/app")
    assert make(store)[1].name == "trusted"
    assert make(store, action(project="local/other"))[1].name == "review"
    assert make(store, action(automation_profile="cautious"))[1].name == "cautious"
    plan, resolved = make(store, action(automation_profile="cautious"), profile_override="ci")
    assert (plan.automation_profile, resolved.source) == ("ci", ProfileSource.PLAN)


def test_the_profile_is_locked_at_creation(sqlite_store: Store) -> None:
    store = sqlite_store
    set_setting(store, "core.automation-profile", "auto")
    plan, _ = make(store)
    set_setting(store, "core.automation-profile", "manual")
    unset_setting(store, "core.automation-profile")
    with store.unit_of_work() as uow:
        assert uow.plans.get(plan.plan_id).automation_profile == "auto"


def test_children_inherit_and_a_later_change_reaches_new_children_only(sqlite_store: Store) -> None:
    store = sqlite_store
    parent, _ = make(store, profile_override="cautious")
    from cleveragents_tui.domain.decision import Decision

    root = Decision(
        plan_id=parent.plan_id,
        sequence_number=0,
        decision_type="prompt_definition",
        phase="strategize",
        question="q",
        chosen_option="c",
    )
    with store.unit_of_work(write=True) as uow:
        uow.decisions.add(root)
        uow.commit()
    set_setting(store, "core.automation-profile", "manual")  # global change: no effect on children
    first, source = make(store, parent=parent, spawning_decision_id=root.decision_id)
    assert (first.automation_profile, source.source) == ("cautious", ProfileSource.PARENT)
    parent = change_profile(store, parent.plan_id, "trusted")
    second, _ = make(store, parent=parent, spawning_decision_id=root.decision_id)
    assert second.automation_profile == "trusted"
    with store.unit_of_work() as uow:
        assert uow.plans.get(first.plan_id).automation_profile == "cautious"


def test_preflight_failure_stores_nothing(sqlite_store: Store) -> None:
    with pytest.raises(PreflightError, match="local/shell is not checkpointable"):
        make(sqlite_store, action(tools=["local/shell"]), profile_override="cautious")
    with sqlite_store.unit_of_work() as uow:
        assert uow.plans.all() == []


def test_an_unknown_profile_is_refused(sqlite_store: Store) -> None:
    with pytest.raises(NotFoundError, match="nonexistent"):
        make(sqlite_store, profile_override="local/nonexistent")


def test_a_custom_profile_locked_to_a_running_plan_cannot_be_replaced(
    sqlite_store: Store, tmp_path: Path
) -> None:
    from cleveragents_tui.automation.profiles import (
        ProfileError,
        ProfileRegistry,
        load_profile_file,
    )
    from cleveragents_tui.resources import data_path

    registry = ProfileRegistry(sqlite_store)
    example = data_path("profiles", "examples", "careful-auto.yaml")
    registry.add(load_profile_file(example))
    make(sqlite_store, profile_override="local/careful-auto")
    with pytest.raises(ProfileError, match="locked to 1 unfinished plan"):
        registry.add(load_profile_file(example), replace=True)
