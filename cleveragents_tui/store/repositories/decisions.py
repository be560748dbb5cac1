"""Decisions, their dependencies and their full contexts.

Decisions are append-only: :class:`DecisionRepository` can add them and set
``superseded_by`` once, and nothing else; database triggers refuse any other change.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, case, func, insert, select, update
from sqlalchemy.orm import Session

from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.dependency import DecisionDependency
from cleveragents_tui.domain.errors import ImmutableRecordError
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.store import mapping, snapshot_reads
from cleveragents_tui.store.correction_queries import among, strings
from cleveragents_tui.store.driver_reads import fetch
from cleveragents_tui.store.replacement_queries import first_after
from cleveragents_tui.store.repositories.base import CHUNK, Repository, resolve_id
from cleveragents_tui.store.session_writes import write_many
from cleveragents_tui.store.tables import (
    ContextBlobRow,
    DecisionArtifactRow,
    DecisionDependencyRow,
    DecisionRow,
)

_LIST_DECISIONS = "see a plan's decisions with `agents plan tree PLAN`"
# built once and run on the driver's cursor: a correction's execute asks it (issue 22)
_LAST_SEQUENCE = select(func.max(DecisionRow.sequence_number)).where(
    DecisionRow.plan_id == bindparam("plan")
)
_INSERT_DECISION = insert(DecisionRow)


@cache
def _plans_of(dialect: str) -> Select[str, str]:
    d = DecisionRow
    return select(d.decision_id, d.plan_id).where(among(dialect, d.decision_id, "ids"))


_INSERT_EDGES = insert(DecisionDependencyRow)
_INSERT_ARTIFACTS = insert(DecisionArtifactRow)

TREE_COLUMNS = (
    DecisionRow.decision_id,
    DecisionRow.parent_decision_id,
    DecisionRow.sequence_number,
    DecisionRow.decision_type,
    DecisionRow.phase,
    DecisionRow.chosen_option,
    DecisionRow.confidence_score,
    DecisionRow.is_correction,
    DecisionRow.corrects_decision_id,
    DecisionRow.superseded_by,
)


def _tree_row_query() -> Select[*tuple[Any, ...]]:
    return select(*TREE_COLUMNS)


@cache
def _tree_rows_of(dialect: str) -> Select[*tuple[Any, ...]]:
    d = DecisionRow
    return _tree_row_query().where(among(dialect, d.decision_id, "ids")).order_by(d.sequence_number)


def _tree_rows(
    session: Session, query: Select[*tuple[Any, ...]], first: int | None = None
) -> list[TreeRow]:
    # Positional construction: the columns are selected in TreeRow's field order, and
    # keyword construction through row._mapping costs a third of a 10,000-row tree.
    ordered = query.order_by(DecisionRow.sequence_number).limit(first)
    return [TreeRow(*row) for row in session.execute(ordered)]


class DecisionRepository(Repository):
    def add(self, decision: Decision) -> None:
        self.add_many([decision])

    def add_many(self, decisions: Sequence[Decision]) -> None:
        """Insert decisions; each parent must be in the same plan (in the batch or stored)."""
        in_batch = {d.decision_id: d.plan_id for d in decisions}
        outside = {
            d.parent_decision_id for d in decisions if d.parent_decision_id
        } - in_batch.keys()
        stored = self._plans_of(outside)
        for d in decisions:
            parent = d.parent_decision_id
            if parent is None:
                continue
            d.check_parent_plan(in_batch.get(parent) or stored.get(parent))
        converted = [mapping.decision_values(d) for d in decisions]
        # what was added to the session before is written first (a new plan, its parent),
        # then the rows as Core inserts on the driver's cursor (store/session_writes.py:
        # the ORM's flush of one decision cost ~1 ms, issue 22), decisions before the rows
        # that refer to them
        self._session.flush()
        write_many(self._session, _INSERT_DECISION, [row for row, _, _ in converted])
        write_many(self._session, _INSERT_EDGES, [d for _, deps, _ in converted for d in deps])
        write_many(self._session, _INSERT_ARTIFACTS, [a for _, _, arts in converted for a in arts])

    def _plans_of(self, decision_ids: Iterable[str]) -> dict[str, str]:
        """The plan of each of these decisions that exists: one statement on the driver's
        cursor, the ids one parameter (correction_queries.among)."""
        ids = set(decision_ids)
        if not ids:
            return {}
        statement = _plans_of(self._session.get_bind().dialect.name)
        rows = fetch(self._session, statement, ids=strings(self._session, ids))
        return {decision_id: plan_id for decision_id, plan_id in rows}

    def resolve(self, ref: str) -> str:
        return resolve_id(
            self._session,
            DecisionRow.decision_id,
            ref,
            "decision",
            _LIST_DECISIONS,
        )

    def get(self, decision_id: str) -> Decision:
        return self._hydrate([self._get(DecisionRow, decision_id, "decision", _LIST_DECISIONS)])[0]

    def for_plan(self, plan_id: str, include_superseded: bool = True) -> list[Decision]:
        query = select(DecisionRow).where(DecisionRow.plan_id == plan_id)
        if not include_superseded:
            query = query.where(DecisionRow.superseded_by.is_(None))
        return self._hydrate(
            list(self._session.scalars(query.order_by(DecisionRow.sequence_number)))
        )

    def current_children(self, decision_id: str) -> list[Decision]:
        """The current decisions under ``decision_id``, in sequence order (a failed call's
        retries and escalation): from the parent index, not the plan's every decision."""
        d = DecisionRow
        query = select(d).where(d.parent_decision_id == decision_id, d.superseded_by.is_(None))
        return self._hydrate(list(self._session.scalars(query.order_by(d.sequence_number))))

    def first_current(self, plan_id: str, phase: str, but_type: str) -> str | None:
        """The plan's first current decision of ``phase`` not of type ``but_type``."""
        d = DecisionRow
        return self._session.scalar(
            select(d.decision_id)
            .where(
                d.plan_id == plan_id,
                d.phase == phase,
                d.decision_type != but_type,
                d.superseded_by.is_(None),
            )
            .order_by(d.sequence_number)
            .limit(1)
        )

    def _hydrate(self, rows: Sequence[DecisionRow]) -> list[Decision]:
        ids = [r.decision_id for r in rows]
        dep, art = DecisionDependencyRow, DecisionArtifactRow
        deps: list[tuple[str, str, str]] = []
        artifacts: list[tuple[str, str, str]] = []
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            deps.extend(
                self._session.execute(
                    select(dep.upstream_decision_id, dep.downstream_ref, dep.dependency_type)
                    .where(dep.upstream_decision_id.in_(chunk))
                    .order_by(dep.dependency_id)
                )
            )
            artifacts.extend(
                self._session.execute(
                    select(art.decision_id, art.artifact_path, art.artifact_type)
                    .where(art.decision_id.in_(chunk))
                    .order_by(art.artifact_id)
                )
            )
        return mapping.decisions_from_rows(rows, deps, artifacts)

    def tree_rows(
        self,
        plan_id: str,
        include_superseded: bool,
        first: int | None = None,
        after: int | None = None,
    ) -> list[TreeRow]:
        """The light rows of a plan's tree, in sequence order; only the ``first`` ones when
        given (the app paints those while the rest load); only those recorded after
        sequence number ``after`` when given (the app adds them to the tree it shows)."""
        query = _tree_row_query().where(DecisionRow.plan_id == plan_id)
        if not include_superseded:
            query = query.where(DecisionRow.superseded_by.is_(None))
        if after is not None:
            query = query.where(DecisionRow.sequence_number > after)
        return _tree_rows(self._session, query, first)

    def tree_rows_of(self, decision_ids: Iterable[str]) -> list[TreeRow]:
        """The light rows of these decisions, in sequence order: one statement on the
        driver's cursor, the ids one parameter — a correction's affected set named without
        reading the whole plan's tree."""
        ids = set(decision_ids)
        if not ids:
            return []
        statement = _tree_rows_of(self._session.get_bind().dialect.name)
        return [
            TreeRow(*row)
            for row in fetch(self._session, statement, ids=strings(self._session, ids))
        ]

    def replacements(self, plan_id: str) -> dict[str, str]:
        """Superseded decision id -> the decision that replaced it, as users are shown it.

        The column ``superseded_by`` holds the correction (``user_intervention``) decision
        that superseded the decision: it is written once, when the correction supersedes,
        before the replay has re-made anything (the append-only triggers allow no later
        change). The decision that replaced it is resolved here, on read, as the first of
        the plan's decisions recorded after that correction that is

        1. at the same step key (the decision made again); else
        2. for the corrected decision itself, a decision of the same type that corrects it
           (``corrects_decision_id``: a recorded plan whose decisions have no step keys); else
        3. at a step new since the correction, of the same type, under a decision of the same
           step (the step taken in its place: ``implement-class`` for ``implement-function``
           once the strategy became a class).

        With none of these, the correction itself is named. For a few decisions,
        ``replacement_queries.replacements_of`` reads only the rows the rule can name.
        """
        rows = self._session.execute(
            select(
                DecisionRow.decision_id,
                DecisionRow.parent_decision_id,
                DecisionRow.decision_type,
                DecisionRow.step_key,
                DecisionRow.sequence_number,
                DecisionRow.corrects_decision_id,
                DecisionRow.superseded_by,
            )
            .where(DecisionRow.plan_id == plan_id)
            .order_by(DecisionRow.sequence_number)
        ).all()
        sequence = {r.decision_id: r.sequence_number for r in rows}
        step = {r.decision_id: r.step_key for r in rows}
        Made = list[tuple[int, str]]  # (sequence number, decision id), in sequence order
        at_step: dict[str, Made] = defaultdict(list)
        correcting: dict[tuple[str, str], Made] = defaultdict(list)
        new_steps: dict[tuple[str, str | None], Made] = defaultdict(list)
        for r in rows:
            entry = (r.sequence_number, r.decision_id)
            if r.corrects_decision_id is not None and r.decision_type != "user_intervention":
                correcting[(r.corrects_decision_id, r.decision_type)].append(entry)
            if r.step_key is None:
                continue
            if r.step_key not in at_step:  # the step's first decision
                new_steps[(r.decision_type, step.get(r.parent_decision_id or ""))].append(entry)
            at_step[r.step_key].append(entry)
        replaced: dict[str, str] = {}
        for r in rows:
            if r.superseded_by is None:
                continue
            replaced[r.decision_id] = r.superseded_by
            correction = sequence.get(r.superseded_by)
            if correction is None:
                continue
            named = first_after(
                correction,
                at_step.get(r.step_key or "", []),
                correcting.get((r.decision_id, r.decision_type), []),
                new_steps.get((r.decision_type, step.get(r.parent_decision_id or "")), [])
                if r.step_key is not None
                else [],
            )
            if named is not None:
                replaced[r.decision_id] = named
        return replaced

    def children_rows(self, decision_id: str) -> list[TreeRow]:
        query = _tree_row_query().where(DecisionRow.parent_decision_id == decision_id)
        return _tree_rows(self._session, query)

    def counts(self, plan_ids: Sequence[str] | None = None) -> dict[str, tuple[int, int]]:
        """plan_id -> (all decisions, current decisions)."""
        current = func.sum(case((DecisionRow.superseded_by.is_(None), 1), else_=0))
        query = select(DecisionRow.plan_id, func.count(), current).group_by(DecisionRow.plan_id)
        if plan_ids is not None:
            query = query.where(DecisionRow.plan_id.in_(plan_ids))
        return {p: (int(n), int(cur or 0)) for p, n, cur in self._session.execute(query)}

    def counts_by_type(self, plan_id: str) -> dict[str, int]:
        return self._count_by(DecisionRow.decision_type, DecisionRow.plan_id == plan_id)

    def type_history(self, decision_type: str) -> tuple[int, int]:
        """(decisions of this type ever recorded, how many of them were superseded)."""
        superseded = func.sum(case((DecisionRow.superseded_by.is_not(None), 1), else_=0))
        row = self._session.execute(
            select(func.count(), superseded).where(DecisionRow.decision_type == decision_type)
        ).one()
        return int(row[0]), int(row[1] or 0)

    def current_steps(
        self, plan_id: str, keys: Collection[str] | None = None
    ) -> dict[str, tuple[str, str]]:
        """step key -> (decision id, chosen option) of the plan's current decisions; of those
        of the steps ``keys`` only, if given: then read through the plan-and-step index and
        put in order here (ordered by the database, SQLite would walk the plan's sequence
        index instead: every decision of the plan)."""
        if keys is not None:
            return snapshot_reads.current_steps(self._session, plan_id, keys)
        d = DecisionRow
        query = select(d.sequence_number, d.step_key, d.decision_id, d.chosen_option).where(
            d.plan_id == plan_id, d.superseded_by.is_(None), d.step_key.is_not(None)
        )
        rows = self._session.execute(query.order_by(d.sequence_number))
        return {str(key): (decision_id, chosen) for _, key, decision_id, chosen in rows}

    def made_from_actor_checkpoint(
        self, plan_id: str, thread_id: str, checkpoint_id: str
    ) -> str | None:
        """The current decision recorded from this LangGraph checkpoint, if any (a re-run step).

        Checkpoint ids are unique per thread only, so both are matched.
        """
        column = DecisionRow.actor_state_ref
        return self._session.scalar(
            select(DecisionRow.decision_id)
            .where(
                DecisionRow.plan_id == plan_id,
                DecisionRow.superseded_by.is_(None),
                column.contains(
                    mapping.dump_json(checkpoint_id).join(('"checkpoint_id":', ",")),
                    autoescape=True,
                ),
                column.contains(
                    mapping.dump_json(thread_id).join(('"thread_id":', "}")), autoescape=True
                ),
            )
            # the step's own decision: its recovery decisions (engine/run/failures.py) share the
            # checkpoint and come later
            .order_by(DecisionRow.sequence_number)
            .limit(1)
        )

    def next_sequence_number(self, plan_id: str) -> int:
        top = fetch(self._session, _LAST_SEQUENCE, plan=plan_id)[0][0]  # the driver's path
        return 0 if top is None else int(top) + 1

    def root_id(self, plan_id: str) -> str | None:
        return self._session.scalar(
            select(DecisionRow.decision_id)
            .where(
                DecisionRow.plan_id == plan_id,
                DecisionRow.parent_decision_id.is_(None),
                DecisionRow.superseded_by.is_(None),
            )
            .order_by(DecisionRow.sequence_number)
            .limit(1)
        )

    def supersede(self, decision_ids: Iterable[str], by: str) -> None:
        """Set ``superseded_by`` on each decision; refuses any already superseded."""
        ids = list(dict.fromkeys(decision_ids))
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start : start + CHUNK]
            result = self._session.execute(
                update(DecisionRow)
                .where(DecisionRow.decision_id.in_(chunk), DecisionRow.superseded_by.is_(None))
                .values(superseded_by=by)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != len(chunk):  # type: ignore[attr-defined]
                raise ImmutableRecordError(
                    "some of these decisions are missing or already superseded",
                    "a decision is superseded once; correct the current decision instead",
                )

    def add_dependency(self, dependency: DecisionDependency) -> None:
        self._session.add(
            DecisionDependencyRow(
                upstream_decision_id=dependency.upstream_decision_id,
                downstream_ref=dependency.downstream_ref,
                dependency_type=dependency.dependency_type.value,
            )
        )

    def depends_on(self, decision_id: str) -> list[str]:
        """Decisions this one declared it depends on (its upstream influence edges)."""
        return list(
            self._session.scalars(
                select(DecisionDependencyRow.upstream_decision_id)
                .where(
                    DecisionDependencyRow.downstream_ref == decision_id,
                    DecisionDependencyRow.dependency_type == "decision",
                )
                .order_by(DecisionDependencyRow.dependency_id)
            )
        )


class ContextBlobRepository(Repository):
    """Full decision contexts, content-addressed (stored once per distinct context)."""

    def put(self, context_hash: str, body: str) -> None:
        if self._session.get(ContextBlobRow, context_hash) is None:
            self._session.add(
                ContextBlobRow(context_hash=context_hash, body=body, created_at=utc_now())
            )

    def get(self, context_hash: str) -> str | None:
        row = self._session.get(ContextBlobRow, context_hash)
        return None if row is None else row.body
