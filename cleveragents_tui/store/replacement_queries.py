"""Which decision replaced a superseded one, as users are shown it — for a few decisions,
from the rows the rule can name rather than every decision of the plan.

The rule is :meth:`DecisionRepository.replacements`'s: the first decision recorded after the
correction that superseded it (``superseded_by``) which is at the same step key, else
corrects it with its type, else is the first decision of a step, of its type, under a
decision of the same step as its parent; with none of these, the correction itself.
``plan explain`` of one superseded decision (and its children), and a correction refused
for a superseded decision, named it from the whole plan's rows: 1.1 s at 100,000 decisions.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import and_, bindparam, exists, select
from sqlalchemy.orm import aliased

from cleveragents_tui.store.correction_queries import among, strings
from cleveragents_tui.store.driver_reads import AnySelect, Reads, fetch
from cleveragents_tui.store.tables import DecisionRow

Made = list[tuple[int, str]]  # (sequence number, decision id), in sequence order


def first_after(correction: int, *candidates: Sequence[tuple[int, str]]) -> str | None:
    """The first decision after sequence number ``correction`` in the first of
    ``candidates`` (each in sequence order) that has one."""
    for made in candidates:
        after = bisect_right(made, correction, key=lambda m: m[0])
        if after < len(made):
            return made[after][1]
    return None


def replacements_of(session: Reads, plan_id: str, decision_ids: Iterable[str]) -> dict[str, str]:
    """Superseded decision id -> the decision that replaced it, for those of
    ``decision_ids`` that are superseded (the others are left out). On the driver's cursor:
    in a unit of work and in the preview's snapshot (store/reading.py) alike."""
    dialect = session.get_bind().dialect.name
    wanted = fetch(
        session, _wanted(dialect), plan=plan_id, ids=strings(session, decision_ids)
    )  # a decision's children may be thousands: one bound parameter
    if not wanted:
        return {}
    found = {decision_id: str(by) for decision_id, _, _, _, by in wanted}
    looked_up = {str(by) for *_, by in wanted} | {p for _, p, *_ in wanted if p is not None}
    known = {
        decision_id: (sequence, step)
        for decision_id, sequence, step in fetch(
            session, _places(dialect), plan=plan_id, ids=strings(session, looked_up)
        )
    }
    since = min((known[by][0] for *_, by in wanted if by in known), default=None)
    if since is None:  # no decision of this plan superseded them: the correction is named
        return found
    steps = {step for _, _, _, step, _ in wanted if step is not None}
    kinds = {kind for _, _, kind, _, _ in wanted}
    at_step = (
        _by_key(
            fetch(
                session, _at_steps(dialect), plan=plan_id, since=since, keys=strings(session, steps)
            )
        )
        if steps
        else {}
    )
    correcting = _by_key(
        fetch(session, _correcting(dialect), plan=plan_id, since=since, ids=strings(session, found))
    )
    new_steps = _by_key(
        fetch(
            session, _new_steps(dialect), plan=plan_id, since=since, kinds=strings(session, kinds)
        )
    )
    for decision_id, parent, kind, step, by in wanted:
        if by not in known:
            continue
        parent_step = known[parent][1] if parent in known else None
        named = first_after(
            known[by][0],
            at_step.get((step,), []) if step is not None else [],
            correcting.get((decision_id, kind), []),
            new_steps.get((kind, parent_step), []) if step is not None else [],
        )
        if named is not None:
            found[decision_id] = named
    return found


def _by_key(rows: Iterable[Any]) -> dict[tuple[Any, ...], Made]:
    """Rows of (key columns…, sequence number, decision id), in sequence order, by key."""
    found: dict[tuple[Any, ...], Made] = defaultdict(list)
    for *key, sequence, decision_id in rows:
        found[tuple(key)].append((sequence, decision_id))
    return found


# Each statement built once per dialect (the driver's path compiles it once: store/driver.py).
_D = DecisionRow


@cache
def _wanted(dialect: str) -> AnySelect:
    d = _D
    return select(
        d.decision_id, d.parent_decision_id, d.decision_type, d.step_key, d.superseded_by
    ).where(
        d.plan_id == bindparam("plan"),
        among(dialect, d.decision_id, "ids"),
        d.superseded_by.is_not(None),
    )


@cache
def _places(dialect: str) -> AnySelect:
    """Each decision's sequence number and step key (the corrections', the parents')."""
    d = _D
    return select(d.decision_id, d.sequence_number, d.step_key).where(
        d.plan_id == bindparam("plan"), among(dialect, d.decision_id, "ids")
    )


@cache
def _at_steps(dialect: str) -> AnySelect:
    """The decisions after ``since`` at one of the step keys."""
    d = _D
    return (
        select(d.step_key, d.sequence_number, d.decision_id)
        .where(
            d.plan_id == bindparam("plan"),
            d.sequence_number > bindparam("since"),
            among(dialect, d.step_key, "keys"),
        )
        .order_by(d.sequence_number)
    )


@cache
def _correcting(dialect: str) -> AnySelect:
    """The decisions after ``since`` that correct one of ``ids`` (not their guidance), by
    (the decision corrected, their type)."""
    d = _D
    return (
        select(d.corrects_decision_id, d.decision_type, d.sequence_number, d.decision_id)
        .where(
            d.plan_id == bindparam("plan"),
            d.sequence_number > bindparam("since"),
            among(dialect, d.corrects_decision_id, "ids"),
            d.decision_type != "user_intervention",
        )
        .order_by(d.sequence_number)
    )


@cache
def _new_steps(dialect: str) -> AnySelect:
    """The first decision of each step recorded after ``since``, of one of ``kinds``, by
    (its type, its parent's step key)."""
    d, parent, earlier = _D, aliased(_D), aliased(_D)
    return (
        select(d.decision_type, parent.step_key, d.sequence_number, d.decision_id)
        .outerjoin(parent, parent.decision_id == d.parent_decision_id)
        .where(
            d.plan_id == bindparam("plan"),
            d.sequence_number > bindparam("since"),
            among(dialect, d.decision_type, "kinds"),
            d.step_key.is_not(None),
            ~exists().where(
                and_(
                    earlier.plan_id == d.plan_id,
                    earlier.step_key == d.step_key,
                    earlier.sequence_number < d.sequence_number,
                )
            ),
        )
        .order_by(d.sequence_number)
    )
