"""Read-only services: list plans, show one, lay out its decision tree, explain a decision.

These must stay fast to import and run: the read-only CLI goes through here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import replace

from cleveragents_tui.domain.errors import WrongPlanError
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.views import (
    DecisionExplanation,
    PlanDetails,
    PlanSummary,
    PlanTree,
    TreeLine,
    TreeRow,
    UsageFigures,
)
from cleveragents_tui.engine.core.reasoner_choice import kept_choice
from cleveragents_tui.engine.run.approvals import goes_on_with_a_run
from cleveragents_tui.engine.run.errors import run_failure
from cleveragents_tui.store.replacement_queries import replacements_of
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork


def list_plans(store: Store) -> list[PlanSummary]:
    """Every plan, each child nested right after its parent (depth-first, oldest first)."""
    with store.unit_of_work() as uow:
        plans = uow.plans.all()
        counts = uow.decisions.counts()
        pending = uow.approvals.pending_counts()
    by_parent: dict[str | None, list[str]] = defaultdict(list)
    by_id = {p.plan_id: p for p in plans}
    for p in plans:
        parent = p.parent_plan_id if p.parent_plan_id in by_id else None
        by_parent[parent].append(p.plan_id)
    out: list[PlanSummary] = []
    stack = [(pid, 0) for pid in reversed(by_parent[None])]
    while stack:
        pid, depth = stack.pop()
        total, current = counts.get(pid, (0, 0))
        out.append(PlanSummary(by_id[pid], total, current, pending.get(pid, 0), depth))
        stack.extend((child, depth + 1) for child in reversed(by_parent[pid]))
    return out


def show_plan(store: Store, plan_ref: str) -> PlanDetails:
    with store.unit_of_work() as uow:
        plan = uow.plans.get(uow.plans.resolve(plan_ref))
        total, current = uow.decisions.counts([plan.plan_id]).get(plan.plan_id, (0, 0))
        counts = uow.approvals.pending_counts()
        pending = counts.get(plan.plan_id, 0)
        family = uow.plans.descendants(plan.plan_id)
        children_pending = sum(counts.get(c.plan_id, 0) for c in family)
        model = kept_choice(uow, plan.plan_id)
        details = PlanDetails(
            summary=PlanSummary(plan, total, current, pending),
            decisions_by_type=uow.decisions.counts_by_type(plan.plan_id),
            children=uow.plans.children(plan.plan_id),
            corrections=uow.corrections.for_plan(plan.plan_id),
            checkpoint_count=uow.checkpoints.count_for_plan(plan.plan_id),
            root_decision_id=uow.decisions.root_id(plan.plan_id),
            error=run_failure(uow, plan),
            model=None if model is None else model.model,
            model_base_url=None if model is None else model.base_url,
            children_pending=children_pending,
            usage=usage_of(uow, plan.plan_id),
        )
    goes_on = goes_on_with_a_run(store, plan, pending + children_pending)
    return replace(details, goes_on_with_a_run=goes_on)


def descendants(store: Store, plan_id: str) -> list[Plan]:
    """The plan's child plans, theirs, and so on (one statement), each before its own."""
    with store.unit_of_work() as uow:
        return uow.plans.descendants(plan_id)


def plan_usage(store: Store, plan_id: str) -> UsageFigures:
    """What the plan's model and tool calls have used so far (``usage_of``)."""
    with store.unit_of_work() as uow:
        return usage_of(uow, plan_id)


def usage_of(uow: UnitOfWork, plan_id: str) -> UsageFigures:
    """The plan's model calls (tokens, cost) and tool calls, as its limits count them."""
    queries = uow.usage
    calls = queries.model_calls(plan_id)
    return UsageFigures(
        model_calls=len(calls),
        tokens=sum(int(str(c.get("tokens", 0))) for c in calls),
        cost_usd=sum(float(str(c.get("cost_usd", 0.0))) for c in calls),
        unpriced_calls=sum(1 for c in calls if c.get("priced") is False),
        tool_calls=queries.tool_calls(plan_id),
    )


def plan_tree(store: Store, plan_ref: str, show_superseded: bool = False) -> PlanTree:
    """The plan's decisions in tree order (children by sequence number). With
    ``show_superseded`` a superseded one names the decision that replaced it
    (``DecisionRepository.replacements``); without, only the current rows are read and the
    others counted: after a correction at ~100% of a large plan nearly every row is one."""
    with store.unit_of_work() as uow:
        plan = uow.plans.get(uow.plans.resolve(plan_ref))
        with_checkpoints = uow.checkpoints.decisions_with_checkpoints(plan.plan_id)
        if not show_superseded:
            rows = uow.decisions.tree_rows(plan.plan_id, include_superseded=False)
            total, current = uow.decisions.counts([plan.plan_id]).get(plan.plan_id, (0, 0))
            return PlanTree(plan, False, layout_tree(rows), total - current, with_checkpoints)
        rows = uow.decisions.tree_rows(plan.plan_id, include_superseded=True)
        if any(r.superseded_by is not None for r in rows):
            rows = naming_replacements(rows, uow.decisions.replacements(plan.plan_id))
    return PlanTree(plan, True, layout_tree(rows), 0, with_checkpoints)


def decision_rows(store: Store, decision_ids: Iterable[str]) -> dict[str, TreeRow]:
    """The tree rows of these decisions by id (what a correction preview names its affected
    decisions with), read by id instead of laying out the plan's whole tree."""
    with store.unit_of_work() as uow:
        return {r.decision_id: r for r in uow.decisions.tree_rows_of(decision_ids)}


def naming_replacements(rows: list[TreeRow], replacements: dict[str, str]) -> list[TreeRow]:
    """``rows`` with each superseded one naming the decision that replaced it."""
    return [
        replace(r, superseded_by=replacements.get(r.decision_id, r.superseded_by))
        if r.superseded_by is not None
        else r
        for r in rows
    ]


def layout_tree(rows: list[TreeRow]) -> list[TreeLine]:
    """Pre-order layout without recursion (a 10,000-deep chain must not blow the stack).

    Rows whose parent is not among ``rows`` (the root, or the child of a hidden superseded
    decision) start a tree of their own.
    """
    present = {r.decision_id for r in rows}
    children: dict[str | None, list[TreeRow]] = defaultdict(list)
    for r in rows:  # rows arrive in sequence order, so each child list is ordered too
        parent = r.parent_decision_id if r.parent_decision_id in present else None
        children[parent].append(r)
    lines: list[TreeLine] = []
    roots = children[None]
    stack = [(r, 0, i == len(roots) - 1) for i, r in reversed(list(enumerate(roots)))]
    while stack:
        row, depth, is_last = stack.pop()
        lines.append(TreeLine(row, depth, is_last))
        kids = children.get(row.decision_id, [])
        for i in range(len(kids) - 1, -1, -1):
            stack.append((kids[i], depth + 1, i == len(kids) - 1))
    return lines


def explain_decision(
    store: Store, decision_ref: str, plan_ref: str | None = None
) -> DecisionExplanation:
    """Everything about one decision; with ``plan_ref``, refuse a decision of another plan."""
    with store.unit_of_work() as uow:
        decision = uow.decisions.get(uow.decisions.resolve(decision_ref))
        if plan_ref is not None:
            plan_id = uow.plans.resolve(plan_ref)
            if decision.plan_id != plan_id:
                raise WrongPlanError(
                    f"decision {decision.decision_id} belongs to plan {decision.plan_id}, not {plan_id}",
                    f"use `agents plan tree {plan_id}` to pick one of its decisions",
                )
        plan = uow.plans.get(decision.plan_id)
        parent = (
            uow.decisions.get(decision.parent_decision_id) if decision.parent_decision_id else None
        )
        children = uow.decisions.children_rows(decision.decision_id)
        superseded = decision.superseded_by or any(c.superseded_by for c in children)
        named = [decision.decision_id, *(c.decision_id for c in children if c.superseded_by)]
        replacements = uow.run(replacements_of, decision.plan_id, named) if superseded else {}
        replacement = None
        if decision.superseded_by is not None:
            replacement = uow.decisions.get(replacements[decision.decision_id])
            decision = decision.model_copy(update={"superseded_by": replacement.decision_id})
        return DecisionExplanation(
            decision=decision,
            plan=plan,
            parent=parent,
            children=naming_replacements(children, replacements),
            dependents=list(decision.downstream_decision_ids),
            depends_on=uow.decisions.depends_on(decision.decision_id),
            tool_invocations=uow.tool_invocations.for_decision(decision.decision_id),
            checkpoints=uow.checkpoints.for_decision(decision.decision_id),
            superseded_by=replacement,
        )
