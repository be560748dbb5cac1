"""Repositories: the only code that reads and writes rows. One per aggregate.

Decisions are append-only: :class:`DecisionRepository` can add them and set
``superseded_by`` once, and nothing else; database triggers refuse any other change.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from sqlalchemy import Select, case, func, select, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from cleveragents_tui.domain.approval import Approval, ApprovalAnswer
from cleveragents_tui.domain.checkpoint import CheckpointGroup, CheckpointMetadata
from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.dependency import DecisionDependency
from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.enums import CheckpointGroupStatus, CorrectionStatus, Phase, PlanState
from cleveragents_tui.domain.errors import (
    AmbiguousIdError,
    ConcurrentChangeError,
    ImmutableRecordError,
    InvalidIdError,
    NotFoundError,
    StoreCorruptedError,
    WrongPlanError,
)
from cleveragents_tui.domain.ids import ULID_LENGTH, is_ulid_prefix, parse_ulid
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.tool import ToolInvocation
from cleveragents_tui.domain.views import TreeRow
from cleveragents_tui.store import mapping
from cleveragents_tui.store.tables import (
    ApplyJournalRow,
    ApprovalRow,
    CheckpointGroupRow,
    CheckpointMetadataRow,
    ContextBlobRow,
    CorrectionAttemptRow,
    DecisionArtifactRow,
    DecisionDependencyRow,
    DecisionRow,
    EventRow,
    PlanActionRow,
    PlanRow,
    ResourceRow,
    SettingRow,
    ToolInvocationRow,
)

MIN_PREFIX = 4
_CHUNK = 500


def _resolve_id(
    session: Session, column: InstrumentedAttribute[str], ref: str, what: str, how_to_list: str
) -> str:
    """A full ULID, or a unique prefix of at least MIN_PREFIX characters (like git's short SHAs)."""
    text = ref.strip().upper()
    if len(text) == ULID_LENGTH:
        return parse_ulid(text, what)
    if not is_ulid_prefix(text) or len(text) < MIN_PREFIX:
        raise InvalidIdError(
            f"{what} '{shorten(ref)}' is not a valid ULID or ULID prefix",
            f"give the 26-character id or at least {MIN_PREFIX} of its first characters",
        )
    # Crockford base32 has no '%' or '_', so the prefix cannot act as a LIKE wildcard.
    matches = list(session.scalars(select(column).where(column.like(f"{text}%")).limit(2)))
    if not matches:
        raise NotFoundError(f"no {what} starts with {text}", how_to_list)
    if len(matches) > 1:
        raise AmbiguousIdError(
            f"{what} prefix {text} matches more than one", "give more characters"
        )
    return str(matches[0])


_TREE_COLUMNS = (
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
    return select(*_TREE_COLUMNS)


def _tree_rows(session: Session, query: Select[*tuple[Any, ...]]) -> list[TreeRow]:
    # Positional construction: the columns are selected in TreeRow's field order, and
    # keyword construction through row._mapping costs a third of a 10,000-row tree.
    ordered = query.order_by(DecisionRow.sequence_number)
    return [TreeRow(*row) for row in session.execute(ordered)]


class PlanRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, plan: Plan) -> None:
        self._session.add(mapping.plan_to_row(plan))

    def resolve(self, ref: str) -> str:
        return _resolve_id(
            self._session, PlanRow.plan_id, ref, "plan", "list plans with `agents plan list`"
        )

    def get(self, plan_id: str) -> Plan:
        row = self._session.get(PlanRow, plan_id)
        if row is None:
            raise NotFoundError(
                f"plan {plan_id} does not exist", "list plans with `agents plan list`"
            )
        return mapping.plan_from_row(row)

    def all(self) -> list[Plan]:
        rows = self._session.scalars(select(PlanRow).order_by(PlanRow.created_at, PlanRow.plan_id))
        return [mapping.plan_from_row(r) for r in rows]

    def states_for_project(self, project: str) -> dict[str, int]:
        query = (
            select(PlanRow.state, func.count())
            .where(PlanRow.project == project)
            .group_by(PlanRow.state)
        )
        return {state: int(n) for state, n in self._session.execute(query)}

    def children(self, plan_id: str) -> list[Plan]:
        rows = self._session.scalars(
            select(PlanRow).where(PlanRow.parent_plan_id == plan_id).order_by(PlanRow.created_at)
        )
        return [mapping.plan_from_row(r) for r in rows]

    def lock(self, plan_id: str) -> Plan:
        """Read the plan and hold it for this transaction: PostgreSQL locks the row (NOWAIT:
        a plan someone else holds fails at once as busy); SQLite's write transaction (BEGIN
        IMMEDIATE) already excludes every other writer."""
        query = select(PlanRow).where(PlanRow.plan_id == plan_id)
        if self._session.get_bind().dialect.name == "postgresql":
            query = query.with_for_update(nowait=True)
        row = self._session.scalars(query).first()
        if row is None:
            raise NotFoundError(
                f"plan {plan_id} does not exist", "list plans with `agents plan list`"
            )
        return mapping.plan_from_row(row)

    def save(self, plan: Plan) -> Plan:
        """Write the plan's mutable fields if nobody else changed it since it was read.

        Returns the plan with its version bumped; raises ConcurrentChangeError otherwise.
        """
        result = self._session.execute(
            update(PlanRow)
            .where(PlanRow.plan_id == plan.plan_id, PlanRow.version == plan.version)
            .values(
                phase=Phase(plan.phase).value,  # model_copy does not validate: accept str too
                state=PlanState(plan.state).value,
                attempt=plan.attempt,
                automation_profile=plan.automation_profile,
                title=plan.title,
                updated_at=plan.updated_at,
                version=plan.version + 1,
            )
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            raise ConcurrentChangeError(
                f"plan {plan.plan_id} was changed by someone else", "reload it and try again"
            )
        return plan.model_copy(update={"version": plan.version + 1})


class DecisionRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

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
            parent_plan = in_batch.get(parent) or stored.get(parent)
            if parent_plan is None:
                raise NotFoundError(
                    f"parent decision {parent} does not exist", "record the parent first"
                )
            if parent_plan != d.plan_id:
                raise WrongPlanError(
                    f"parent decision {parent} belongs to plan {parent_plan}, not {d.plan_id}",
                    "a decision's parent must be in the same plan",
                )
        converted = [mapping.decision_to_rows(d) for d in decisions]
        # Decisions first: the ORM does not order these inserts by foreign key on its own.
        self._session.add_all([row for row, _, _ in converted])
        self._session.flush()
        for _, deps, artifacts in converted:
            self._session.add_all(deps)
            self._session.add_all(artifacts)

    def _plans_of(self, decision_ids: Iterable[str]) -> dict[str, str]:
        ids = list(decision_ids)
        found: dict[str, str] = {}
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            rows = self._session.execute(
                select(DecisionRow.decision_id, DecisionRow.plan_id).where(
                    DecisionRow.decision_id.in_(chunk)
                )
            )
            found.update({r.decision_id: r.plan_id for r in rows})
        return found

    def resolve(self, ref: str) -> str:
        return _resolve_id(
            self._session,
            DecisionRow.decision_id,
            ref,
            "decision",
            "see a plan's decisions with `agents plan tree PLAN`",
        )

    def get(self, decision_id: str) -> Decision:
        row = self._session.get(DecisionRow, decision_id)
        if row is None:
            raise NotFoundError(
                f"decision {decision_id} does not exist",
                "see a plan's decisions with `agents plan tree PLAN`",
            )
        return self._hydrate([row])[0]

    def for_plan(self, plan_id: str, include_superseded: bool = True) -> list[Decision]:
        query = select(DecisionRow).where(DecisionRow.plan_id == plan_id)
        if not include_superseded:
            query = query.where(DecisionRow.superseded_by.is_(None))
        return self._hydrate(
            list(self._session.scalars(query.order_by(DecisionRow.sequence_number)))
        )

    def _hydrate(self, rows: Sequence[DecisionRow]) -> list[Decision]:
        ids = [r.decision_id for r in rows]
        deps: dict[str, list[tuple[str, str]]] = defaultdict(list)
        artifacts: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            for d in self._session.execute(
                select(DecisionDependencyRow)
                .where(DecisionDependencyRow.upstream_decision_id.in_(chunk))
                .order_by(DecisionDependencyRow.dependency_id)
            ).scalars():
                deps[d.upstream_decision_id].append((d.downstream_ref, d.dependency_type))
            for a in self._session.execute(
                select(DecisionArtifactRow)
                .where(DecisionArtifactRow.decision_id.in_(chunk))
                .order_by(DecisionArtifactRow.artifact_id)
            ).scalars():
                artifacts[a.decision_id].append((a.artifact_path, a.artifact_type))
        return [
            mapping.decision_from_row(r, deps[r.decision_id], artifacts[r.decision_id])
            for r in rows
        ]

    def tree_rows(self, plan_id: str, include_superseded: bool) -> list[TreeRow]:
        """The light rows of a plan's tree, in sequence order."""
        query = _tree_row_query().where(DecisionRow.plan_id == plan_id)
        if not include_superseded:
            query = query.where(DecisionRow.superseded_by.is_(None))
        return _tree_rows(self._session, query)

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

        With none of these, the correction itself is named.
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
            candidates = (
                at_step.get(r.step_key or "", []),
                correcting.get((r.decision_id, r.decision_type), []),
                new_steps.get((r.decision_type, step.get(r.parent_decision_id or "")), [])
                if r.step_key is not None
                else [],
            )
            for made in candidates:
                after = bisect_right(made, correction, key=lambda m: m[0])
                if after < len(made):
                    replaced[r.decision_id] = made[after][1]
                    break
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
        query = (
            select(DecisionRow.decision_type, func.count())
            .where(DecisionRow.plan_id == plan_id)
            .group_by(DecisionRow.decision_type)
        )
        return {t: int(n) for t, n in self._session.execute(query)}

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
        d = DecisionRow
        query = select(d.sequence_number, d.step_key, d.decision_id, d.chosen_option).where(
            d.plan_id == plan_id, d.superseded_by.is_(None), d.step_key.is_not(None)
        )
        if keys is None:
            rows = list(self._session.execute(query.order_by(d.sequence_number)))
        else:
            rows = sorted(self._session.execute(query.where(d.step_key.in_(sorted(keys)))))
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
        top = self._session.scalar(
            select(func.max(DecisionRow.sequence_number)).where(DecisionRow.plan_id == plan_id)
        )
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
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
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


class ResourceRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, resource: Resource) -> None:
        self._session.add(mapping.resource_to_row(resource))

    def get(self, resource_id: str) -> Resource:
        row = self._session.get(ResourceRow, resource_id)
        if row is None:
            raise NotFoundError(f"resource {resource_id} does not exist")
        return mapping.resource_from_row(row)

    def all(self) -> list[Resource]:
        """Every resource, removed ones too: plans that used them still name them."""
        return [mapping.resource_from_row(r) for r in self._session.scalars(select(ResourceRow))]

    def registered(self) -> list[Resource]:
        """The resources new plans may use (not removed), by name."""
        rows = self._session.scalars(
            select(ResourceRow)
            .where(ResourceRow.removed_at.is_(None))
            .order_by(ResourceRow.resource_id)
        )
        return [mapping.resource_from_row(r) for r in rows]

    def is_removed(self, resource_id: str) -> bool:
        row = self._session.get(ResourceRow, resource_id)
        return row is not None and row.removed_at is not None

    def set_checkpoints(
        self, resource_id: str, *, enabled: bool | None = None, max_per_plan: int | None = None
    ) -> None:
        row = self._session.get(ResourceRow, resource_id)
        if row is None:
            raise NotFoundError(f"resource {resource_id} does not exist")
        if enabled is not None:
            row.checkpoint_enabled = enabled
        if max_per_plan is not None:
            row.checkpoint_max_per_plan = max_per_plan

    def plans_using(self, resource_id: str) -> list[tuple[str, PlanState]]:
        """(plan id, state) of every plan whose stored action names the resource."""
        needle = mapping.dump_json(resource_id)
        rows = self._session.execute(
            select(PlanRow.plan_id, PlanRow.state, PlanActionRow.definition)
            .join(PlanActionRow, PlanActionRow.plan_id == PlanRow.plan_id)
            .where(PlanActionRow.definition.contains(needle, autoescape=True))
            .order_by(PlanRow.created_at, PlanRow.plan_id)
        )
        found = []
        for plan_id, state, definition in rows:
            action = mapping.load_json("plan_actions", plan_id, "definition", definition)
            if resource_id in _named_resources(action):
                found.append((plan_id, PlanState(state)))
        return found

    def remove(self, resource_id: str) -> bool:
        """Delete the resource if nothing refers to it (True); else mark it removed (False),
        so the plans, checkpoints and Apply journals that name it keep working."""
        row = self._session.get(ResourceRow, resource_id)
        if row is None:
            raise NotFoundError(f"resource {resource_id} does not exist")
        referenced = (
            self._session.scalar(
                select(func.count())
                .select_from(CheckpointMetadataRow)
                .where(CheckpointMetadataRow.resource_id == resource_id)
            )
            or self._session.scalar(
                select(func.count())
                .select_from(ApplyJournalRow)
                .where(ApplyJournalRow.resource_id == resource_id)
            )
            or self.plans_using(resource_id)
        )
        if referenced:
            row.removed_at = utc_now()
            return False
        self._session.delete(row)
        return True


def _named_resources(action: object) -> set[str]:
    """The resources a stored action names, its subactions' (child plans to come) included."""
    if not isinstance(action, dict):
        return set()
    named = {r for r in action.get("resources") or () if isinstance(r, str)}
    for sub in action.get("subactions") or ():
        named |= _named_resources(sub)
    return named


class CheckpointRepository:
    """Checkpoint groups and per-resource checkpoints.

    A group is inserted ``pending`` (its own short transaction), collects the refs made for
    it in ``pending_refs`` so recovery can undo them, and is flipped to ``committed`` in the
    transaction that inserts its decision and checkpoint rows.
    """

    def __init__(self, session: Session) -> None:
        self._session = session

    def add_group(self, group: CheckpointGroup) -> None:
        self._session.add(mapping.group_to_row(group))

    def add(self, checkpoint: CheckpointMetadata) -> None:
        self._session.add(mapping.checkpoint_to_row(checkpoint))

    def note_pending_ref(self, group_id: str, resource_id: str, ref: str) -> None:
        row = self._pending_row(group_id)
        refs = mapping.load_json("checkpoint_groups", group_id, "pending_refs", row.pending_refs)
        row.pending_refs = mapping.dump_json([*refs, [resource_id, ref]])

    def commit_group(self, group_id: str, decision_id: str) -> None:
        row = self._pending_row(group_id)
        row.status = CheckpointGroupStatus.COMMITTED.value
        row.decision_id = decision_id
        row.pending_refs = "[]"

    def delete_pending_group(self, group_id: str) -> None:
        self._session.delete(self._pending_row(group_id))

    def _pending_row(self, group_id: str) -> CheckpointGroupRow:
        row = self._session.get(CheckpointGroupRow, group_id)
        if row is None or row.status != CheckpointGroupStatus.PENDING.value:
            raise NotFoundError(f"no pending checkpoint group {group_id}")
        return row

    def pending_groups(self) -> list[tuple[CheckpointGroup, list[tuple[str, str]]]]:
        rows = self._session.scalars(
            select(CheckpointGroupRow)
            .where(CheckpointGroupRow.status == CheckpointGroupStatus.PENDING.value)
            .order_by(CheckpointGroupRow.created_at)
        )
        out = []
        for row in rows:
            refs = mapping.load_json(
                "checkpoint_groups", row.group_id, "pending_refs", row.pending_refs
            )
            out.append((mapping.group_from_row(row), [(str(r), str(f)) for r, f in refs]))
        return out

    def for_decision(self, decision_id: str) -> list[CheckpointMetadata]:
        rows = self._session.scalars(
            select(CheckpointMetadataRow)
            .where(CheckpointMetadataRow.decision_id == decision_id)
            .order_by(CheckpointMetadataRow.resource_id)
        )
        return [mapping.checkpoint_from_row(r) for r in rows]

    def for_plan(self, plan_id: str, resource_id: str | None = None) -> list[CheckpointMetadata]:
        """A plan's checkpoints (optionally one resource's), oldest first."""
        query = select(CheckpointMetadataRow).where(CheckpointMetadataRow.plan_id == plan_id)
        if resource_id is not None:
            query = query.where(CheckpointMetadataRow.resource_id == resource_id)
        rows = self._session.scalars(
            query.order_by(CheckpointMetadataRow.created_at, CheckpointMetadataRow.checkpoint_id)
        )
        return [mapping.checkpoint_from_row(r) for r in rows]

    def live_for(self, plan_id: str, resource_id: str) -> list[CheckpointMetadata]:
        """One resource's live (not pruned) checkpoints in the plan, oldest first: what a
        checkpoint budget counts, as many as the budget allows whatever the plan's size."""
        rows = self._session.scalars(
            select(CheckpointMetadataRow)
            .where(
                CheckpointMetadataRow.plan_id == plan_id,
                CheckpointMetadataRow.resource_id == resource_id,
                CheckpointMetadataRow.pruned_at.is_(None),
            )
            .order_by(CheckpointMetadataRow.created_at, CheckpointMetadataRow.checkpoint_id)
        )
        return [mapping.checkpoint_from_row(r) for r in rows]

    def resources_checkpointed(self, plan_id: str, *, decision_groups_only: bool) -> set[str]:
        """The resources with checkpoint rows in the plan (only in decision groups, if asked)."""
        query = select(CheckpointMetadataRow.resource_id).where(
            CheckpointMetadataRow.plan_id == plan_id
        )
        if decision_groups_only:
            query = query.where(CheckpointMetadataRow.checkpoint_type != "pre_write")
        return set(self._session.scalars(query.distinct()))

    def mark_pruned(self, checkpoint_ids: Sequence[str]) -> None:
        if checkpoint_ids:
            self._session.execute(
                update(CheckpointMetadataRow)
                .where(CheckpointMetadataRow.checkpoint_id.in_(list(checkpoint_ids)))
                .values(pruned_at=utc_now())
            )

    def decisions_with_checkpoints(self, plan_id: str) -> frozenset[str]:
        rows = self._session.scalars(
            select(CheckpointMetadataRow.decision_id)
            .where(
                CheckpointMetadataRow.plan_id == plan_id,
                CheckpointMetadataRow.decision_id.is_not(None),
            )
            .distinct()
        )
        return frozenset(r for r in rows if r is not None)

    def count_for_plan(self, plan_id: str) -> int:
        return int(
            self._session.scalar(
                select(func.count())
                .select_from(CheckpointMetadataRow)
                .where(CheckpointMetadataRow.plan_id == plan_id)
            )
            or 0
        )

    def groups_for_plan(self, plan_id: str) -> list[CheckpointGroup]:
        rows = self._session.scalars(
            select(CheckpointGroupRow)
            .where(CheckpointGroupRow.plan_id == plan_id)
            .order_by(CheckpointGroupRow.created_at)
        )
        return [mapping.group_from_row(r) for r in rows]


class ToolInvocationRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, invocation: ToolInvocation) -> None:
        self._session.add(mapping.invocation_to_row(invocation))

    def for_decision(self, decision_id: str) -> list[ToolInvocation]:
        rows = self._session.scalars(
            select(ToolInvocationRow)
            .where(ToolInvocationRow.decision_id == decision_id)
            .order_by(ToolInvocationRow.created_at, ToolInvocationRow.invocation_id)
        )
        return [mapping.invocation_from_row(r) for r in rows]


class CorrectionRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, correction: CorrectionAttempt) -> None:
        self._session.add(mapping.correction_to_row(correction))

    def get(self, correction_id: str) -> CorrectionAttempt:
        row = self._session.get(CorrectionAttemptRow, correction_id)
        if row is None:
            raise NotFoundError(
                f"correction {correction_id} does not exist",
                "see a plan's corrections with `agents plan show`",
            )
        return mapping.correction_from_row(row)

    def finish(
        self,
        correction_id: str,
        status: CorrectionStatus,
        *,
        report: dict[str, object],
        replacement: str | None = None,
        appended: str | None = None,
    ) -> None:
        """Record how a running correction ended (once). Snapshots recorded for its diff
        while it ran (``record_snapshots``) stay in the report."""
        kept = self._session.scalar(
            select(CorrectionAttemptRow.report).where(
                CorrectionAttemptRow.correction_id == correction_id
            )
        )
        loaded = mapping.load_json("correction_attempts", correction_id, "report", kept)
        if isinstance(loaded, dict) and "snapshots" in loaded and "snapshots" not in report:
            report = {**report, "snapshots": loaded["snapshots"]}
        result = self._session.execute(
            update(CorrectionAttemptRow)
            .where(
                CorrectionAttemptRow.correction_id == correction_id,
                CorrectionAttemptRow.status == CorrectionStatus.RUNNING.value,
            )
            .values(
                status=status.value,
                report=mapping.dump_json(report),
                replacement_decision_id=replacement,
                appended_plan_id=appended,
                finished_at=utc_now(),
            )
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            raise ConcurrentChangeError(f"correction {correction_id} already ended")

    def record_snapshots(self, correction_id: str, snapshots: dict[str, object]) -> bool:
        """Keep what a correction's diff compares in its report (``snapshots``), merged into
        what is kept there. Recorded again each time its replay stops, until the replay has
        ended (``"replay": "ended"``, or snapshots without ``replay``, recorded once by an
        older version): from then on they never change. False when they were final."""
        row = self._session.get(CorrectionAttemptRow, correction_id)
        if row is None:
            raise NotFoundError(
                f"correction {correction_id} does not exist",
                "see a plan's corrections with `agents plan show`",
            )
        report = mapping.load_json("correction_attempts", correction_id, "report", row.report)
        report = report if isinstance(report, dict) else {}
        kept = report.get("snapshots")
        kept = kept if isinstance(kept, dict) else {}
        if kept and kept.get("replay", "ended") == "ended":
            return False
        row.report = mapping.dump_json({**report, "snapshots": {**kept, **snapshots}})
        return True

    def for_plan(self, plan_id: str) -> list[CorrectionAttempt]:
        rows = self._session.scalars(
            select(CorrectionAttemptRow)
            .where(CorrectionAttemptRow.plan_id == plan_id)
            .order_by(CorrectionAttemptRow.created_at)
        )
        return [mapping.correction_from_row(r) for r in rows]

    def running(self, plan_id: str) -> CorrectionAttempt | None:
        """The plan's correction still running, if any (there is at most one)."""
        row = self._session.scalars(
            select(CorrectionAttemptRow).where(
                CorrectionAttemptRow.plan_id == plan_id,
                CorrectionAttemptRow.status == CorrectionStatus.RUNNING.value,
            )
        ).first()
        return None if row is None else mapping.correction_from_row(row)


class ApprovalRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, approval: Approval) -> None:
        self._session.add(mapping.approval_to_row(approval))

    def get(self, approval_id: str) -> Approval:
        row = self._session.get(ApprovalRow, approval_id)
        if row is None:
            raise NotFoundError(
                f"approval {approval_id} does not exist", "list them with `agents approvals`"
            )
        return mapping.approval_from_row(row)

    def for_plan(self, plan_id: str) -> list[Approval]:
        """Every approval of the plan, answered or not, oldest first."""
        rows = self._session.scalars(
            select(ApprovalRow)
            .where(ApprovalRow.plan_id == plan_id)
            .order_by(ApprovalRow.requested_at, ApprovalRow.approval_id)
        )
        return [mapping.approval_from_row(r) for r in rows]

    def pending(self, plan_id: str | None = None) -> list[Approval]:
        query = select(ApprovalRow).where(ApprovalRow.answer.is_(None))
        if plan_id is not None:
            query = query.where(ApprovalRow.plan_id == plan_id)
        rows = self._session.scalars(query.order_by(ApprovalRow.requested_at))
        return [mapping.approval_from_row(r) for r in rows]

    def answer(self, approval_id: str, answer: ApprovalAnswer, by: str, reason: str | None) -> None:
        """Record the answer once; a second answer is refused."""
        result = self._session.execute(
            update(ApprovalRow)
            .where(ApprovalRow.approval_id == approval_id, ApprovalRow.answer.is_(None))
            .values(answer=answer.value, answered_by=by, reason=reason, answered_at=utc_now())
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            self.get(approval_id)  # raises NotFoundError for an unknown id
            raise ConcurrentChangeError(
                f"approval {approval_id} was already answered",
                "see its answer with `agents approvals --all`",
            )

    def pending_counts(self) -> dict[str, int]:
        query = (
            select(ApprovalRow.plan_id, func.count())
            .where(ApprovalRow.answer.is_(None))
            .group_by(ApprovalRow.plan_id)
        )
        return {p: int(n) for p, n in self._session.execute(query)}


class SettingRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, scope: str, key: str) -> object | None:
        row = self._session.get(SettingRow, (scope, key))
        return (
            None
            if row is None
            else mapping.load_json("settings", f"{scope}/{key}", "value", row.value)
        )

    def set(self, scope: str, key: str, value: object) -> None:
        row = self._session.get(SettingRow, (scope, key))
        if row is None:
            self._session.add(
                SettingRow(
                    scope=scope, key=key, value=mapping.dump_json(value), updated_at=utc_now()
                )
            )
        else:
            row.value = mapping.dump_json(value)
            row.updated_at = utc_now()

    def unset(self, scope: str, key: str) -> bool:
        row = self._session.get(SettingRow, (scope, key))
        if row is None:
            return False
        self._session.delete(row)
        return True

    def all(self) -> list[tuple[str, str, object]]:
        rows = self._session.scalars(select(SettingRow).order_by(SettingRow.scope, SettingRow.key))
        return [
            (r.scope, r.key, mapping.load_json("settings", f"{r.scope}/{r.key}", "value", r.value))
            for r in rows
        ]


class EventRepository:
    """The audit log: append only."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def payloads(self, plan_id: str, kind: str) -> list[dict[str, object]]:
        """The payloads of one plan's events of one kind, oldest first."""
        rows = self._session.scalars(
            select(EventRow.payload)
            .where(EventRow.plan_id == plan_id, EventRow.kind == kind)
            .order_by(EventRow.event_id)
        )
        loaded = [mapping.load_json("events", plan_id, "payload", raw) for raw in rows]
        return [payload for payload in loaded if isinstance(payload, dict)]

    def append(
        self,
        kind: str,
        payload: dict[str, object],
        plan_id: str | None = None,
        actor: str | None = None,
    ) -> None:
        self._session.add(
            EventRow(
                plan_id=plan_id,
                kind=kind,
                actor=actor,
                payload=mapping.dump_json(payload),
                created_at=utc_now(),
            )
        )


class PlanActionRepository:
    """The action definition each plan was created from."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def save(
        self, plan_id: str, definition: dict[str, object], sandbox_plan_id: str | None = None
    ) -> None:
        self._session.add(
            PlanActionRow(
                plan_id=plan_id,
                definition=mapping.dump_json(definition),
                sandbox_plan_id=sandbox_plan_id,
            )
        )

    def sandbox_plan(self, plan_id: str) -> str:
        """Whose sandboxes the plan works in: its own, or its host's."""
        row = self._session.get(PlanActionRow, plan_id)
        return plan_id if row is None or row.sandbox_plan_id is None else row.sandbox_plan_id

    def get(self, plan_id: str) -> dict[str, object]:
        row = self._session.get(PlanActionRow, plan_id)
        if row is None:
            raise NotFoundError(
                f"plan {plan_id} has no stored action", "it was not created with `agents plan use`"
            )
        loaded = mapping.load_json("plan_actions", plan_id, "definition", row.definition)
        if not isinstance(loaded, dict):
            raise StoreCorruptedError(f"plan_actions row {plan_id}: definition is not an object")
        return loaded


class ContextBlobRepository:
    """Full decision contexts, content-addressed (stored once per distinct context)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def put(self, context_hash: str, body: str) -> None:
        if self._session.get(ContextBlobRow, context_hash) is None:
            self._session.add(
                ContextBlobRow(context_hash=context_hash, body=body, created_at=utc_now())
            )

    def get(self, context_hash: str) -> str | None:
        row = self._session.get(ContextBlobRow, context_hash)
        return None if row is None else row.body
