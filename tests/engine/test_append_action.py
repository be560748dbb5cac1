"""The appended plan's action (docs/corrections.md, "Append"): the corrected point and the
points that exist only for a choice of it — never the rest of the plan's action."""

from __future__ import annotations

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.engine.correct.append import corrective_action, predict


def point(key: str, kind: str = "implementation_choice", **extra: object) -> dict[str, object]:
    options = extra.pop("options", ["only"])
    assert isinstance(options, list)
    alternatives = [{"option": o, "match": [o]} for o in options]
    return {"key": key, "type": kind, "question": f"{key}?", "alternatives": alternatives, **extra}


ACTION = Action.model_validate(
    {
        "name": "local/app",
        "prompt": "build it",
        "decisions": [
            point("style", "strategy_choice", options=["plain", "fancy"]),
            point("other", "strategy_choice", options=["red", "blue"]),
            point("plain-code", parent="style", depends_on=["style"], when={"style": "plain"}),
            point("fancy-code", parent="style", depends_on=["style"], when={"style": "fancy"}),
            point("fancy-extra", when={"fancy-code": "only"}),  # follows transitively
            point("fancy-blue", when={"style": "fancy", "other": "blue"}),  # other is red
            point("test", "tool_invocation", parent="style", depends_on=["style"]),
        ],
    }
)


def decision(key: str, phase: Phase = Phase.STRATEGIZE) -> Decision:
    return Decision(
        plan_id="01J0000000000000000000000A",
        parent_decision_id="01J0000000000000000000000B",
        sequence_number=1,
        decision_type=(
            DecisionType.STRATEGY_CHOICE
            if phase is Phase.STRATEGIZE
            else DecisionType.IMPLEMENTATION_CHOICE
        ),
        phase=phase,
        question=f"{key}?",
        chosen_option="plain",
        step_key=key,
    )


def test_the_corrected_point_and_the_points_its_choice_gates_and_nothing_else() -> None:
    current = {"style": "plain", "other": "red", "plain-code": "only", "test": "only"}
    child = corrective_action(ACTION, decision("style"), "make it fancy", current)
    assert [p.key for p in child.decisions] == [
        "style",
        "plain-code",
        "fancy-code",
        "fancy-extra",
    ]  # not `test` (it follows `style` but is the plan's own work), not `fancy-blue`
    assert child.prompt == "make it fancy"
    steps, _ = predict(child, decision("style"), "make it fancy", None)
    assert [(s.key, s.chosen_option) for s in steps] == [
        ("style", "fancy"),
        ("fancy-code", "only"),
        ("fancy-extra", "only"),
    ]


def test_a_gated_point_keeps_no_condition_on_points_left_out() -> None:
    current = {"style": "fancy", "other": "red", "fancy-code": "only"}
    child = corrective_action(ACTION, decision("fancy-code", Phase.EXECUTE), "again", current)
    [code, extra] = child.decisions
    assert (code.key, code.when, code.parent, code.depends_on) == ("fancy-code", {}, None, ())
    assert (extra.key, extra.when) == ("fancy-extra", {"fancy-code": "only"})


def test_a_decision_without_a_point_gives_an_action_without_points() -> None:
    child = corrective_action(ACTION, decision("prompt"), "also a changelog", {})
    assert child.decisions == () and child.prompt == "also a changelog"
    assert predict(child, decision("prompt"), "also a changelog", None) == ((), ())


def test_the_alternative_the_user_named_is_the_one_predicted() -> None:
    child = corrective_action(ACTION, decision("style"), "whatever", {"style": "plain"})
    steps, _ = predict(child, decision("style"), "make it fancy", "plain")
    assert steps[0].chosen_option == "plain"
