"""Each validation rule of spec/decision-domain-model.md, tested so it fails without the rule."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from cleveragents_tui.domain.decision import ActorStateRef, ContextSnapshot, Decision, ResourceRef
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.ids import new_ulid

PLAN = new_ulid()
PARENT = new_ulid()


def make(**overrides: Any) -> Decision:
    fields: dict[str, Any] = {
        "plan_id": PLAN,
        "parent_decision_id": PARENT,
        "sequence_number": 3,
        "decision_type": "implementation_choice",
        "question": "How should arguments be parsed?",
        "chosen_option": "click",
    }
    fields.update(overrides)
    return Decision(**fields)


def test_a_valid_decision_gets_an_id_a_phase_and_a_utc_timestamp() -> None:
    d = make()
    assert len(d.decision_id) == 26
    assert d.phase is Phase.EXECUTE
    assert d.created_at.tzinfo is not None
    assert d.created_at.utcoffset() == timedelta(0)
    assert d.is_current


def test_the_eleven_decision_types_and_their_phases_match_the_specification() -> None:
    expected = {
        "prompt_definition": "strategize",
        "invariant_enforced": "strategize",
        "strategy_choice": "strategize",
        "implementation_choice": "execute",
        "resource_selection": "execute",
        "subplan_spawn": "strategize",
        "subplan_parallel_spawn": "strategize",
        "tool_invocation": "execute",
        "error_recovery": "execute",
        "validation_response": "execute",
        "user_intervention": None,
    }
    assert {t.value: (t.phase.value if t.phase else None) for t in DecisionType} == expected


@pytest.mark.parametrize(
    "field",
    ["plan_id", "parent_decision_id", "corrects_decision_id", "superseded_by", "decision_id"],
)
@pytest.mark.parametrize(
    "bad", ["not-a-ulid", "01HXM4", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "01HXM4ILOU00000000000000000"]
)
def test_ids_must_be_valid_ulids(field: str, bad: str) -> None:
    extra = {"is_correction": True} if field == "corrects_decision_id" else {}
    with pytest.raises(ValidationError, match="ULID"):
        make(**{field: bad}, **extra)


def test_ulids_are_stored_in_canonical_upper_case() -> None:
    lower = new_ulid().lower()
    assert make(plan_id=lower).plan_id == lower.upper()


@pytest.mark.parametrize("score", [-0.01, 1.01, float("nan"), float("inf")])
def test_confidence_outside_zero_to_one_is_refused(score: float) -> None:
    with pytest.raises(ValidationError, match="confidence_score"):
        make(confidence_score=score)


@pytest.mark.parametrize("score", [0.0, 0.5, 1.0, None])
def test_confidence_in_range_or_none_is_accepted(score: float | None) -> None:
    assert make(confidence_score=score).confidence_score == score


def test_a_prompt_definition_must_be_the_root() -> None:
    with pytest.raises(ValidationError, match="prompt_definition decision is the root"):
        make(decision_type="prompt_definition", parent_decision_id=PARENT)
    root = make(decision_type="prompt_definition", parent_decision_id=None)
    assert root.parent_decision_id is None


def test_only_a_prompt_definition_may_be_the_root() -> None:
    with pytest.raises(ValidationError, match="needs a parent_decision_id"):
        make(decision_type="strategy_choice", parent_decision_id=None)


def test_is_correction_requires_corrects_decision_id() -> None:
    with pytest.raises(ValidationError, match="corrects_decision_id must be set"):
        make(is_correction=True)


def test_corrects_decision_id_requires_is_correction() -> None:
    with pytest.raises(ValidationError, match="is_correction must be True"):
        make(corrects_decision_id=new_ulid())
    ok = make(is_correction=True, corrects_decision_id=new_ulid())
    assert ok.is_correction


def test_a_decision_cannot_point_at_itself() -> None:
    own = new_ulid()
    with pytest.raises(ValidationError, match="must not point at the decision itself"):
        make(decision_id=own, superseded_by=own)


def test_the_phase_must_match_the_type() -> None:
    with pytest.raises(ValidationError, match="made during execute"):
        make(phase="strategize")


def test_user_intervention_happens_in_any_phase_but_needs_it_named() -> None:
    for phase in Phase:
        assert make(decision_type="user_intervention", phase=phase).phase is phase
    with pytest.raises(ValidationError, match="phase"):
        make(decision_type="user_intervention")


@pytest.mark.parametrize("field", ["question", "chosen_option"])
@pytest.mark.parametrize("bad", ["", "   \n", "nul\x00byte"])
def test_question_and_chosen_option_are_required_text(field: str, bad: str) -> None:
    with pytest.raises(ValidationError, match=field):
        make(**{field: bad})


def test_sequence_numbers_start_at_zero() -> None:
    with pytest.raises(ValidationError, match="sequence_number"):
        make(sequence_number=-1)


def test_unknown_decision_type_is_refused() -> None:
    with pytest.raises(ValidationError, match="decision_type"):
        make(decision_type="guess")


def test_hot_context_hash_must_be_a_sha256_digest() -> None:
    with pytest.raises(ValidationError, match="SHA-256"):
        ContextSnapshot(hot_context_hash="abc")
    good = "a" * 64
    assert ContextSnapshot(hot_context_hash=good).hot_context_hash == good


def test_context_snapshot_resource_refs_are_namespaced_names() -> None:
    with pytest.raises(ValidationError, match="namespace/name"):
        ResourceRef(resource_id="no-namespace")
    with pytest.raises(ValidationError, match="namespace/name"):
        ResourceRef(resource_id="../etc/passwd")
    assert ResourceRef(resource_id="local/hello-cli", path="src").path == "src"


def test_actor_state_ref_names_its_thread() -> None:
    with pytest.raises(ValidationError, match="thread_id"):
        ActorStateRef(thread_id="", checkpoint_id="1ef")
    ref = ActorStateRef(thread_id="plan-1:execution", checkpoint_id="1ef", node="decide", step=4)
    assert (
        make(context_snapshot=ContextSnapshot(actor_state_ref=ref)).context_snapshot.actor_state_ref
        == ref
    )


def test_created_at_must_be_timezone_aware_and_is_kept_in_utc() -> None:
    with pytest.raises(ValidationError, match="timezone"):
        make(created_at=datetime(2026, 1, 1, 12, 0))
    plus_two = timezone(timedelta(hours=2))
    d = make(created_at=datetime(2026, 1, 1, 14, 0, tzinfo=plus_two))
    assert d.created_at == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert d.created_at.tzinfo is UTC


def test_decisions_are_immutable() -> None:
    d = make()
    with pytest.raises(ValidationError, match="frozen"):
        d.superseded_by = new_ulid()  # type: ignore[misc]


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValidationError, match="extra"):
        make(mood="optimistic")
