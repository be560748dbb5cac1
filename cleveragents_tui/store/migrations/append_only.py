"""The decisions table's SQLite append-only trigger, as the migrations that create it share it.

Frozen like the migrations themselves: a revision that ran must keep producing the same
schema, so a new decisions column gets a new column list here, never an edited one.
"""

from __future__ import annotations

APPEND_ONLY_MESSAGE = "decisions are append-only"

# Every decisions column of revision 0001 but superseded_by: the append-only triggers compare
# them all. A later migration that adds a decisions column recreates the trigger with it.
DECISION_COLUMNS_0001 = (
    "decision_id",
    "plan_id",
    "parent_decision_id",
    "sequence_number",
    "decision_type",
    "phase",
    "question",
    "chosen_option",
    "alternatives_considered",
    "confidence_score",
    "hot_context_hash",
    "hot_context_ref",
    "relevant_resources",
    "actor_state_ref",
    "rationale",
    "actor_reasoning",
    "created_at",
    "is_correction",
    "corrects_decision_id",
    "correction_reason",
)


def sqlite_supersede_only(columns: tuple[str, ...]) -> str:
    """SQLite's trigger letting an update only set ``superseded_by``, once."""
    unchanged = " AND ".join(f"NEW.{c} IS OLD.{c}" for c in columns)
    return (
        "CREATE TRIGGER decisions_supersede_only BEFORE UPDATE ON decisions "
        f"WHEN NOT (OLD.superseded_by IS NULL AND NEW.superseded_by IS NOT NULL AND {unchanged}) "
        f"BEGIN SELECT RAISE(ABORT, '{APPEND_ONLY_MESSAGE}: only superseded_by may be set, once'); END"
    )
