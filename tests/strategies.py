"""Hypothesis strategies that build valid domain models."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import strategies as st

from cleveragents_tui.domain.decision import (
    ActorStateRef,
    ArtifactRef,
    ContextSnapshot,
    Decision,
    ResourceRef,
)
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.ids import new_ulid

ulids = st.builds(new_ulid)
text = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=60)
required = text.filter(lambda s: s.strip() != "")
names = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,10}/[a-z0-9][a-z0-9._-]{0,10}", fullmatch=True)
moments = st.datetimes(
    min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
snapshots = st.builds(
    ContextSnapshot,
    hot_context_hash=st.none() | st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
    hot_context_ref=st.none() | text,
    relevant_resources=st.lists(
        st.builds(ResourceRef, resource_id=names, path=st.none() | text), max_size=3
    ).map(tuple),
    actor_state_ref=st.none()
    | st.builds(
        ActorStateRef,
        thread_id=required,
        checkpoint_ns=text,
        checkpoint_id=required,
        node=st.none() | text,
        step=st.none() | st.integers(0, 10_000),
    ),
)
NON_ROOT_TYPES = [t for t in DecisionType if t is not DecisionType.PROMPT_DEFINITION]


@st.composite
def decisions(draw: st.DrawFn, plan_id: str, parent_id: str, correctable: str) -> Decision:
    """A non-root decision under ``parent_id``; a correction (if drawn) corrects ``correctable``."""
    kind = draw(st.sampled_from(NON_ROOT_TYPES))
    phase = kind.phase or draw(st.sampled_from(list(Phase)))
    is_correction = draw(st.booleans())
    return Decision(
        plan_id=plan_id,
        parent_decision_id=parent_id,
        sequence_number=draw(st.integers(1, 2**31 - 1)),
        decision_type=kind,
        phase=phase,
        question=draw(required),
        chosen_option=draw(required),
        alternatives_considered=tuple(draw(st.lists(required, max_size=4))),
        confidence_score=draw(st.none() | st.floats(0.0, 1.0)),
        context_snapshot=draw(snapshots),
        rationale=draw(st.none() | text),
        actor_reasoning=draw(st.none() | text),
        downstream_decision_ids=tuple(draw(st.lists(ulids, max_size=3, unique=True))),
        downstream_plan_ids=tuple(draw(st.lists(ulids, max_size=2, unique=True))),
        artifacts_produced=tuple(
            draw(
                st.lists(
                    st.builds(ArtifactRef, artifact_path=required, artifact_type=required),
                    max_size=3,
                )
            )
        ),
        created_at=draw(moments),
        is_correction=is_correction,
        corrects_decision_id=correctable if is_correction else None,
        correction_reason=draw(st.none() | text) if is_correction else None,
        superseded_by=draw(st.none() | st.just(correctable)),
        step_key=draw(st.none() | text),
    )
