"""Plain-text rendering of the read models only the CLI shows (plan list, details) and of
the tree's layout. The views the app shows too — explain, the impact preview, the diff, the
plan heading and a decision's tree line — are in cleveragents_tui/views, one rendering for
both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.views import plan as plan_view

if TYPE_CHECKING:  # the engine is imported when a command runs, not at start-up
    from cleveragents_tui.domain.plan import Plan
    from cleveragents_tui.domain.views import (
        PlanDetails,
        PlanSummary,
        PlanTree,
        UsageFigures,
    )


def _line(text: str) -> str:
    """A name or title shown inside one line (a heading, a table cell): a newline in it
    is shown as ``\\n`` rather than breaking the line (the output escapes the rest)."""
    return printable(text, one_line=True)


def usage_line(usage: UsageFigures) -> str:
    """``2,400 tokens in 2 model calls · $0.000540 · 1 tool call``."""
    calls = "call" if usage.model_calls == 1 else "calls"
    tools = "call" if usage.tool_calls == 1 else "calls"
    line = (
        f"{usage.tokens:,} tokens in {usage.model_calls} model {calls} · "
        f"${usage.cost_usd:.6f} · {usage.tool_calls} tool {tools}"
    )
    if usage.unpriced_calls:
        line += f" ({usage.unpriced_calls} unpriced, counted $0: set prices.PROVIDER:MODEL.*)"
    return line


def plan_heading(plan: Plan) -> str:
    """The heading the app's status bar shows (cleveragents_tui/views/plan.py)."""
    return plan_view.line_text(plan_view.plan_heading(plan))


def plan_list(summaries: list[PlanSummary]) -> str:
    if not summaries:
        return "No plans yet. Load a sample with `agents demo-data`."
    header = ("PLAN", "ACTION", "PHASE", "STATE", "ATT", "PROFILE", "DECISIONS", "APPROVALS")
    rows = [header]
    for s in summaries:
        p = s.plan
        indent = "  " * s.depth + ("└ " if s.depth else "")
        rows.append(
            (
                p.plan_id,
                indent + _line(p.action),
                p.phase.value,
                p.state.value,
                str(p.attempt),
                _line(p.automation_profile),
                f"{s.current_decision_count}/{s.decision_count}",
                str(s.pending_approvals),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


def _family_pending(details: PlanDetails) -> str:
    """What else the approvals line says: its child plans' questions, or that a plan waiting
    on none goes on with a run."""
    if details.children_pending:
        return f", {details.children_pending} in its child plans"
    plan = details.summary.plan
    if details.goes_on_with_a_run:
        return f": nothing left to answer, go on with agents plan run {plan.plan_id}"
    return ""


def plan_details(details: PlanDetails) -> str:
    s = details.summary
    p = s.plan
    lines = [
        plan_heading(p),
        f"title        {_line(p.title or '-')}",
        f"project      {_line(p.project or '-')}",
        f"created      {p.created_at.isoformat()}",
        f"updated      {p.updated_at.isoformat()}",
        f"decisions    {s.current_decision_count} current, {s.decision_count - s.current_decision_count} superseded",
        f"root         {details.root_decision_id or '-'}",
        f"checkpoints  {details.checkpoint_count}",
        f"approvals    {s.pending_approvals} pending" + _family_pending(details),
    ]
    if details.model:
        at = f" at {_line(details.model_base_url)}" if details.model_base_url else ""
        lines.append(f"model        {_line(details.model)}{at} (the chat reasoner)")
    if details.error:
        lines.append(f"error        {_line(details.error)}")
    lines.append(f"usage        {usage_line(details.usage)}")
    if p.parent_plan_id:
        lines.append(
            f"parent       {p.parent_plan_id} (spawned by decision {p.spawning_decision_id})"
        )
    if details.decisions_by_type:
        lines.append(
            "by type      "
            + ", ".join(f"{t} {n}" for t, n in sorted(details.decisions_by_type.items()))
        )
    if details.children:
        lines.append("child plans")
        lines.extend(
            f"  {c.plan_id}  {_line(c.action)}  {c.phase.value} · {c.state.value}"
            for c in details.children
        )
    if details.corrections:
        from cleveragents_tui.domain.enums import PlanState
        from cleveragents_tui.views.corrections import correction_line

        lines.append("corrections")
        went_on = details.summary.plan.state is not PlanState.ERRORED
        lines.extend(f"  {correction_line(c, went_on)}" for c in details.corrections)
    return "\n".join(lines)


def plan_tree(tree: PlanTree) -> str:
    out = [plan_heading(tree.plan)]
    # trunks[d] is the guide drawn left of a depth-d decision; set as its parent is drawn.
    trunks = ["", ""]
    for line in tree.lines:
        r = line.row
        depth = line.depth
        if depth == 0:
            prefix = ""
            trunks[1:] = [""]
        else:
            prefix = trunks[depth] + ("└── " if line.is_last else "├── ")
            del trunks[depth + 1 :]
            trunks.append(trunks[depth] + ("    " if line.is_last else "│   "))
        text = plan_view.line_text(plan_view.tree_line(r, r.decision_id in tree.has_checkpoints))
        out.append(f"{r.decision_id}  {prefix}{text}")
    if not tree.lines:
        out.append("(no decisions recorded yet)")
    if tree.hidden_superseded:
        out.append(
            f"({counted(tree.hidden_superseded, 'superseded decision')} hidden; "
            "--show-superseded shows them)"
        )
    return "\n".join(out)
