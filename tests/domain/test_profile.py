"""Automation profile model: flags, threshold semantics, safety profile, guards."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from cleveragents_tui.domain.profile import (
    BUILTIN_PROFILE_NAMES,
    AutomationFlag,
    AutomationGuard,
    AutomationProfile,
    GuardResult,
    GuardScope,
    SafetyProfile,
)

FLAGS = [flag.value for flag in AutomationFlag]
confidences = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
intermediate = st.floats(min_value=0.0, max_value=1.0, exclude_min=True, exclude_max=True)


def profile(**overrides: Any) -> AutomationProfile:
    data: dict[str, Any] = {"name": "local/test", **dict.fromkeys(FLAGS, 0.5)}
    data.update(overrides)
    return AutomationProfile.model_validate(data)


def guarded(**guards: Any) -> AutomationProfile:
    return profile(guards=guards)


# Flags ---------------------------------------------------------------------------------


def test_exactly_the_eleven_flags_of_the_spec_in_order() -> None:
    assert FLAGS == [
        "decompose_task",
        "create_tool",
        "select_tool",
        "edit_code",
        "execute_command",
        "create_file",
        "delete_content",
        "access_network",
        "install_dependency",
        "modify_config",
        "approve_plan",
    ]


@pytest.mark.parametrize(
    ("flag", "description"),
    [
        ("decompose_task", "Automatically enter Strategize after plan use"),
        ("create_tool", "Automatically proceed from Strategize to Execute"),
        ("select_tool", "Automatically proceed from Execute to Apply"),
        ("edit_code", "Automatically make decisions during Strategize"),
        ("execute_command", "Automatically make decisions during Execute"),
        ("create_file", "Automatically attempt to fix validation failures"),
        ("delete_content", "Automatically revise strategy when Execute hits constraints"),
        ("access_network", "Automatically revert from Apply (constrained state) to Strategize"),
        ("install_dependency", "Automatically spawn and execute child plans"),
        (
            "modify_config",
            "Automatically retry on transient failures (network, timeout, rate-limit)",
        ),
        ("approve_plan", "Automatically restore from checkpoint on failure"),
    ],
)
def test_each_flag_describes_the_behaviour_of_the_spec(flag: str, description: str) -> None:
    member = AutomationFlag(flag)
    assert member.description == description
    assert member.gates
    assert member.when_met
    assert member.when_below


def test_gates_labels_name_the_transition_not_the_flag_name() -> None:
    assert AutomationFlag.SELECT_TOOL.gates == "Execute → Apply"
    assert AutomationFlag.CREATE_TOOL.gates == "Strategize → Execute"
    assert AutomationFlag.APPROVE_PLAN.gates == "restore from checkpoint on failure"
    assert AutomationFlag.MODIFY_CONFIG.gates == "retry transient failures"


# The profile model ----------------------------------------------------------------------


def test_all_eleven_thresholds_are_required() -> None:
    for flag in FLAGS:
        data: dict[str, Any] = {"name": "local/x", **dict.fromkeys(FLAGS, 0.0)}
        del data[flag]
        with pytest.raises(ValidationError) as caught:
            AutomationProfile.model_validate(data)
        assert caught.value.errors()[0]["loc"] == (flag,)


@pytest.mark.parametrize("value", [0, 0.0, 0.25, 1, 1.0])
def test_thresholds_accept_0_to_1_inclusive(value: float) -> None:
    assert profile(edit_code=value).threshold(AutomationFlag.EDIT_CODE) == float(value)


@pytest.mark.parametrize("value", [-0.01, 1.5, 2, float("nan"), float("inf"), -1])
def test_thresholds_outside_0_1_are_refused(value: float) -> None:
    with pytest.raises(ValidationError, match="edit_code"):
        profile(edit_code=value)


@pytest.mark.parametrize("value", ["0.5", True, None, [0.5], "high"])
def test_thresholds_must_be_numbers(value: object) -> None:
    with pytest.raises(ValidationError, match="select_tool"):
        profile(select_tool=value)


def test_unknown_keys_are_refused_at_every_level() -> None:
    with pytest.raises(ValidationError, match="edit_cod"):
        profile(edit_cod=0.5)
    with pytest.raises(ValidationError, match="require_sandboxes"):
        profile(safety={"require_sandboxes": True})
    with pytest.raises(ValidationError, match="max_calls"):
        profile(guards={"max_calls": 3})


@pytest.mark.parametrize("name", [*BUILTIN_PROFILE_NAMES, "local/careful", "team.a/x_y-1"])
def test_names_builtin_or_namespaced(name: str) -> None:
    assert profile(name=name).name == name


@pytest.mark.parametrize("name", ["careful", "a/b/c", "local/", "/x", "", "lo cal/x", "-x/y"])
def test_other_names_are_refused(name: str) -> None:
    with pytest.raises(ValidationError, match="name"):
        profile(name=name)


def test_bare_name_error_suggests_a_namespace() -> None:
    with pytest.raises(ValidationError, match=r"call it e\.g\. local/careful"):
        profile(name="careful")


def test_profile_is_frozen_and_is_builtin() -> None:
    p = profile()
    with pytest.raises(ValidationError):
        p.edit_code = 0.1  # type: ignore[misc]
    assert not p.is_builtin
    assert profile(name="ci").is_builtin


def test_defaults_safety_and_no_guards() -> None:
    p = profile()
    assert p.safety == SafetyProfile()
    assert p.guards is None
    assert p.description == ""


def test_threshold_lookup_by_flag_or_name() -> None:
    p = profile(select_tool=1.0)
    assert p.threshold("select_tool") == 1.0
    assert p.threshold(AutomationFlag.SELECT_TOOL) == 1.0
    assert list(p.thresholds()) == list(AutomationFlag)
    with pytest.raises(ValueError, match="not_a_flag"):
        p.threshold("not_a_flag")


def test_automatic_manual_and_confidence_flags() -> None:
    p = profile(decompose_task=0.0, select_tool=1.0)
    assert p.automatic_flags() == (AutomationFlag.DECOMPOSE_TASK,)
    assert p.manual_flags() == (AutomationFlag.SELECT_TOOL,)
    assert len(p.confidence_flags()) == 9


def test_json_round_trip() -> None:
    p = profile(
        safety={"max_cost_per_plan": 1.5, "allowed_skill_categories": ["docs"]},
        guards={"tool_denylist": ["rm"], "max_tool_calls_per_step": 2},
    )
    assert AutomationProfile.model_validate_json(p.model_dump_json()) == p


# Threshold semantics -------------------------------------------------------------------


@given(confidence=confidences)
def test_threshold_zero_always_proceeds(confidence: float) -> None:
    assert profile(edit_code=0.0).proceeds(AutomationFlag.EDIT_CODE, confidence)


@given(confidence=confidences)
def test_threshold_one_never_proceeds(confidence: float) -> None:
    assert not profile(select_tool=1.0).proceeds(AutomationFlag.SELECT_TOOL, confidence)


def test_threshold_one_is_manual_even_at_confidence_exactly_one() -> None:
    assert not profile(select_tool=1.0).proceeds("select_tool", 1.0)


@given(threshold=intermediate, confidence=confidences, flag=st.sampled_from(list(AutomationFlag)))
def test_intermediate_threshold_compares_at_or_above(
    threshold: float, confidence: float, flag: AutomationFlag
) -> None:
    p = profile(**{flag.value: threshold})
    assert p.proceeds(flag, confidence) == (confidence >= threshold)


@given(threshold=intermediate)
def test_confidence_equal_to_threshold_proceeds(threshold: float) -> None:
    assert profile(create_file=threshold).proceeds("create_file", threshold)


@pytest.mark.parametrize("confidence", [-0.1, 1.01, float("nan"), float("inf")])
def test_confidence_outside_0_1_is_a_programming_error(confidence: float) -> None:
    with pytest.raises(ValueError, match="confidence"):
        profile().proceeds("edit_code", confidence)


def test_confidence_must_be_a_number() -> None:
    with pytest.raises(TypeError):
        profile().proceeds("edit_code", True)
    with pytest.raises(TypeError):
        profile().proceeds("edit_code", "0.5")  # type: ignore[arg-type]


# Safety profile ------------------------------------------------------------------------


def test_safety_defaults_are_the_spec_defaults() -> None:
    s = SafetyProfile()
    assert s.require_sandbox is True
    assert s.require_checkpoints is True
    assert s.allow_unsafe_tools is False
    assert s.require_human_approval is False
    assert s.allowed_skill_categories == ()
    assert s.max_cost_per_plan is None
    assert s.max_total_cost is None
    assert s.max_retries_per_step == 3


@pytest.mark.parametrize("value", [0, 1, 50, 100])
def test_retries_in_range(value: int) -> None:
    assert SafetyProfile(max_retries_per_step=value).max_retries_per_step == value


@pytest.mark.parametrize("value", [-1, 101, 3.0, True, "3"])
def test_retries_out_of_range_or_not_an_integer(value: object) -> None:
    with pytest.raises(ValidationError, match="max_retries_per_step"):
        SafetyProfile.model_validate({"max_retries_per_step": value})


@pytest.mark.parametrize("field", ["max_cost_per_plan", "max_total_cost"])
@pytest.mark.parametrize("value", [-0.01, float("inf"), float("nan")])
def test_costs_must_be_finite_and_not_negative(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field):
        SafetyProfile.model_validate({field: value})


def test_cost_per_plan_at_most_total_cost() -> None:
    assert SafetyProfile(max_cost_per_plan=5, max_total_cost=5).max_cost_per_plan == 5
    assert SafetyProfile(max_cost_per_plan=0, max_total_cost=None).max_total_cost is None
    assert SafetyProfile(max_cost_per_plan=None, max_total_cost=1).max_cost_per_plan is None
    with pytest.raises(ValidationError, match=r"max_cost_per_plan \(5.0\) must be <= max_total"):
        SafetyProfile(max_cost_per_plan=5, max_total_cost=2)


@given(per_plan=st.floats(0, 1e6), total=st.floats(0, 1e6))
def test_cost_ordering_property(per_plan: float, total: float) -> None:
    if per_plan <= total:
        assert SafetyProfile(max_cost_per_plan=per_plan, max_total_cost=total)
    else:
        with pytest.raises(ValidationError):
            SafetyProfile(max_cost_per_plan=per_plan, max_total_cost=total)


@pytest.mark.parametrize(
    "field",
    ["require_sandbox", "require_checkpoints", "allow_unsafe_tools", "require_human_approval"],
)
@pytest.mark.parametrize("value", ["yes", 1, None])
def test_safety_booleans_are_strict(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        SafetyProfile.model_validate({field: value})


def test_skill_categories_are_non_empty_strings() -> None:
    assert SafetyProfile.model_validate(
        {"allowed_skill_categories": ["docs", "tests"]}
    ).allowed_skill_categories == ("docs", "tests")
    with pytest.raises(ValidationError):
        SafetyProfile.model_validate({"allowed_skill_categories": [""]})
    with pytest.raises(ValidationError):
        SafetyProfile.model_validate({"allowed_skill_categories": [3]})


# Guards --------------------------------------------------------------------------------


def test_guard_fields_validated() -> None:
    assert AutomationGuard() == AutomationGuard(
        max_tool_calls_per_step=None,
        max_total_cost=None,
        tool_allowlist=None,
        tool_denylist=None,
        require_approval_for_writes=False,
        require_approval_for_apply=False,
    )
    for bad in ({"max_tool_calls_per_step": -1}, {"max_total_cost": -0.5}, {"oops": 1}):
        with pytest.raises(ValidationError):
            AutomationGuard.model_validate(bad)


def test_no_guards_allows_everything() -> None:
    result = profile().check_guard("rm", True, 1e9, 10**6, GuardScope.PLAN, is_apply=True)
    assert result == GuardResult(allowed=True, reason=None, requires_approval=False)


def test_empty_guards_allow_everything() -> None:
    assert guarded().check_guard("x", True, 5.0, 5, GuardScope.SUBPLAN).allowed


@pytest.mark.parametrize("scope", list(GuardScope))
def test_denylist(scope: GuardScope) -> None:
    p = guarded(tool_denylist=["deploy"])
    result = p.check_guard("deploy", False, 0.0, 0, scope)
    assert not result.allowed
    assert result.requires_approval
    assert result.reason is not None
    assert result.reason.startswith(f"{scope.value} guard: ")
    assert "'deploy' is on the deny list" in result.reason
    assert p.check_guard("read", False, 0.0, 0, scope).allowed


@pytest.mark.parametrize("scope", list(GuardScope))
def test_allowlist(scope: GuardScope) -> None:
    p = guarded(tool_allowlist=["read", "grep"])
    assert p.check_guard("grep", False, 0.0, 0, scope).allowed
    result = p.check_guard("write", False, 0.0, 0, scope)
    assert (result.allowed, result.requires_approval) == (False, True)
    assert result.reason == (
        f"{scope.value} guard: tool 'write' is not on the allow list, so it cannot run "
        "automatically"
    )


def test_empty_allowlist_allows_nothing_automatically() -> None:
    assert not guarded(tool_allowlist=[]).check_guard("read", False, 0, 0, GuardScope.PLAN).allowed


@pytest.mark.parametrize("scope", list(GuardScope))
def test_tool_call_limit(scope: GuardScope) -> None:
    p = guarded(max_tool_calls_per_step=3)
    assert [p.check_guard("t", False, 0, n, scope).allowed for n in range(5)] == [
        True,
        True,
        True,
        False,
        False,
    ]
    reason = p.check_guard("t", False, 0, 3, scope).reason
    assert reason == (
        f"{scope.value} guard: 3 tool calls in this step reached the limit of 3 "
        "(max_tool_calls_per_step)"
    )


def test_tool_call_limit_zero_escalates_every_call() -> None:
    assert not guarded(max_tool_calls_per_step=0).check_guard("t", False, 0, 0, "plan").allowed  # type: ignore[arg-type]


@pytest.mark.parametrize("scope", list(GuardScope))
def test_budget_cap(scope: GuardScope) -> None:
    p = guarded(max_total_cost=2.5)
    assert p.check_guard("t", False, 2.49, 0, scope).allowed
    result = p.check_guard("t", False, 2.5, 0, scope)
    assert (result.allowed, result.requires_approval) == (False, True)
    assert result.reason == (
        f"{scope.value} guard: cost so far 2.5 reached the budget cap of 2.5 (max_total_cost)"
    )


@pytest.mark.parametrize("scope", list(GuardScope))
def test_write_approval(scope: GuardScope) -> None:
    p = guarded(require_approval_for_writes=True)
    assert p.check_guard("edit", False, 0, 0, scope).allowed
    result = p.check_guard("edit", True, 0, 0, scope)
    assert not result.allowed
    assert result.reason is not None
    assert result.reason.startswith(f"{scope.value} guard: tool 'edit' writes")


@pytest.mark.parametrize("scope", list(GuardScope))
def test_apply_approval(scope: GuardScope) -> None:
    p = guarded(require_approval_for_apply=True)
    assert p.check_guard("land", True, 0, 0, scope).allowed
    result = p.check_guard("land", True, 0, 0, scope, is_apply=True)
    assert not result.allowed
    assert result.requires_approval
    assert result.reason is not None
    assert result.reason.startswith(f"{scope.value} guard: ")
    assert "Apply step" in result.reason


def test_guards_off_do_not_escalate_writes_or_apply() -> None:
    assert guarded().check_guard("w", True, 0, 0, GuardScope.PLAN, is_apply=True).allowed


ALL_GUARDS: dict[str, Any] = {
    "tool_denylist": ["t"],
    "tool_allowlist": ["other"],
    "max_tool_calls_per_step": 1,
    "max_total_cost": 1.0,
    "require_approval_for_writes": True,
    "require_approval_for_apply": True,
}
ORDER = [
    ("tool_denylist", "deny list"),
    ("tool_allowlist", "allow list"),
    ("max_tool_calls_per_step", "max_tool_calls_per_step"),
    ("max_total_cost", "max_total_cost"),
    ("require_approval_for_writes", "require_approval_for_writes"),
    ("require_approval_for_apply", "require_approval_for_apply"),
]


@pytest.mark.parametrize("first", range(len(ORDER)))
def test_evaluation_order(first: int) -> None:
    """With every guard tripped, the earliest one still enabled in the order reports."""
    guards = dict(ALL_GUARDS)
    for field, _ in ORDER[:first]:
        guards.pop(field)
    result = guarded(**guards).check_guard("t", True, 5.0, 5, GuardScope.SUBPLAN, is_apply=True)
    assert not result.allowed
    assert result.reason is not None
    assert ORDER[first][1] in result.reason
    assert result.reason.startswith("subplan guard: ")
    for _, later in ORDER[first + 1 :]:
        assert later not in result.reason


def test_denylist_wins_over_allowlist() -> None:
    p = guarded(tool_allowlist=["t"], tool_denylist=["t"])
    reason = p.check_guard("t", False, 0, 0, GuardScope.PLAN).reason
    assert reason is not None
    assert "deny list" in reason


@given(
    calls=st.integers(0, 20),
    cost=st.floats(0, 20, allow_nan=False),
    is_write=st.booleans(),
    limit=st.integers(0, 20),
    cap=st.floats(0, 20, allow_nan=False),
)
def test_limits_property(calls: int, cost: float, is_write: bool, limit: int, cap: float) -> None:
    p = guarded(max_tool_calls_per_step=limit, max_total_cost=cap)
    result = p.check_guard("t", is_write, cost, calls, GuardScope.PLAN)
    assert result.allowed == (calls < limit and cost < cap)
    assert result.requires_approval == (not result.allowed)


def test_negative_counters_are_programming_errors() -> None:
    with pytest.raises(ValueError, match="calls_so_far"):
        guarded().check_guard("t", False, 0.0, -1, GuardScope.PLAN)
    with pytest.raises(ValueError, match="cost_so_far"):
        guarded().check_guard("t", False, -1.0, 0, GuardScope.PLAN)
