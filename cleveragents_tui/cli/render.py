"""Plain-text rendering of the read models for the terminal."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from cleveragents_tui.domain.display import printable

if TYPE_CHECKING:  # the engine is imported when a command runs, not at start-up
    from cleveragents_tui.domain.decision import Decision
    from cleveragents_tui.domain.plan import Plan
    from cleveragents_tui.domain.views import (
        DecisionExplanation,
        PlanDetails,
        PlanSummary,
        PlanTree,
        UsageFigures,
    )
    from cleveragents_tui.engine.append import AppendPlan

SUPERSEDED_MARK = "✗ "
CORRECTION_MARK = "↻ "
CHECKPOINT_BADGE = "  ⚑"
MAX_OPTION = 72


def one_line(text: str, limit: int = MAX_OPTION) -> str:
    first = " ".join(text.split())
    return first if len(first) <= limit else first[: limit - 1] + "…"


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
    parts = [
        f"plan {plan.plan_id}",
        _line(plan.action),
        plan.phase.value,
        plan.state.value,
        f"attempt {plan.attempt}",
        f"profile {_line(plan.automation_profile)}",
    ]
    return " · ".join(parts)


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
        f"approvals    {s.pending_approvals} pending",
    ]
    if details.model:
        lines.append(f"model        {_line(details.model)} (the chat reasoner)")
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
        lines.append("corrections")
        lines.extend(
            f"  {c.correction_id}  {c.mode.value} of {c.target_decision_id} · {c.status.value} · "
            f"attempt {c.attempt}" + (f" · by {c.requested_by}" if c.requested_by else "")
            for c in details.corrections
        )
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
        mark = SUPERSEDED_MARK if r.superseded_by else (CORRECTION_MARK if r.is_correction else "")
        text = f"{r.decision_id}  {prefix}{mark}{r.decision_type}: {one_line(r.chosen_option)}"
        if r.confidence_score is not None:
            text += f"  ({r.confidence_score:.2f})"
        if r.decision_id in tree.has_checkpoints:
            text += CHECKPOINT_BADGE
        if r.superseded_by:
            text += f"  [superseded by {r.superseded_by}]"
        out.append(text)
    if not tree.lines:
        out.append("(no decisions recorded yet)")
    if tree.hidden_superseded:
        out.append(
            f"({tree.hidden_superseded} superseded decisions hidden; --show-superseded shows them)"
        )
    return "\n".join(out)


def _field(label: str, value: str | None) -> str:
    return f"{label:<13}{value if value not in (None, '') else '-'}"


def _decision_ref(d: Decision) -> str:
    return f"{d.decision_id}  {d.decision_type.value}: {one_line(d.chosen_option)}"


def _listing(title: str, items: Iterable[str]) -> list[str]:
    items = list(items)
    return [title, *(f"  {i}" for i in items)] if items else [f"{title:<13}-"]


def decision_explanation(e: DecisionExplanation) -> str:
    d = e.decision
    snap = d.context_snapshot
    lines = [
        f"decision {d.decision_id} · {d.decision_type.value} · {d.phase.value} · #{d.sequence_number}",
        _field("plan", f"{e.plan.plan_id}  {_line(e.plan.action)}"),
        _field("parent", _decision_ref(e.parent) if e.parent else "(root)"),
        "",
        _field("question", d.question),
        _field("chosen", d.chosen_option),
        _field("alternatives", "; ".join(d.alternatives_considered)),
        _field("confidence", None if d.confidence_score is None else f"{d.confidence_score:.2f}"),
        _field("rationale", d.rationale),
        _field("reasoning", d.actor_reasoning),
        _field("created", d.created_at.isoformat()),
        "",
        "downstream impact",
        *(f"  depends on it: {ref}" for ref in e.dependents),
        *(f"  child plan:    {ref}" for ref in d.downstream_plan_ids),
        *(f"  artifact:      {a.artifact_path} ({a.artifact_type})" for a in d.artifacts_produced),
        *(
            f"  child:         {c.decision_id}  {c.decision_type}: {one_line(c.chosen_option)}"
            for c in e.children
        ),
    ]
    if not (e.dependents or d.downstream_plan_ids or d.artifacts_produced or e.children):
        lines.append("  (nothing depends on this decision)")
    if e.depends_on:
        lines += _listing("depends on", e.depends_on)
    resources = ", ".join(
        r.resource_id + (f":{r.path}" if r.path else "") for r in snap.relevant_resources
    )
    actor = snap.actor_state_ref
    lines += [
        "",
        "context",
        f"  hash          {snap.hot_context_hash or '-'}",
        f"  ref           {snap.hot_context_ref or '-'}",
        f"  resources     {resources or '-'}",
        f"  actor state   {f'thread {actor.thread_id} checkpoint {actor.checkpoint_id}' if actor else '-'}",
    ]
    if e.tool_invocations:
        lines.append("tool invocations")
        for t in e.tool_invocations:
            effects = ", ".join(t.side_effects) or "no declared side effects"
            lines.append(
                f"  {t.tool}  ({effects})" + ("  ⚠ irreversible" if t.irreversible else "")
            )
    if e.checkpoints:
        lines.append("checkpoints")
        lines.extend(
            f"  {c.resource_id}  {c.strategy.value}  {c.checkpoint_type.value}  {c.ref}"
            for c in e.checkpoints
        )
    if d.is_correction:
        lines += [
            "",
            _field("corrects", d.corrects_decision_id),
            _field("reason", d.correction_reason),
        ]
    if e.superseded_by is not None:
        lines += ["", f"superseded by {_decision_ref(e.superseded_by)}"]  # the replacement
    return "\n".join(lines)


def append_lines(plan_id: str, appended: AppendPlan) -> list[str]:
    """What an append will do (``agents plan correct --mode=append``): the appended plan's
    decisions, the sandboxes it works in, and how it lands."""
    lines = ["  appended plan: a corrective child plan of this plan that makes"]
    if not appended.predicted:
        lines.append(
            "    what its actor decides under the guidance (no decision point of the action "
            "is this decision's: the scripted reasoner makes none)"
        )
    for n, step in enumerate(appended.steps, 1):
        work = [*step.tool_calls, *(f"spawns {s}" for s in step.spawns)]
        lines.append(
            f"    {n}. {step.key} ({step.phase.value}): {one_line(step.chosen_option)}"
            + (f" — {', '.join(work)}" if work else "")
        )
    if appended.sandbox_host is not None:
        lines.append(
            f"  works in: the sandboxes of plan {appended.sandbox_host}, on top of what they "
            "hold now; lands once, with that plan's Apply"
        )
    else:
        lines.append(
            f"  works in: sandboxes of its own, made from the real resources (plan {plan_id} "
            "is applied); lands on its own Apply, on its own branch"
        )
    lines.append(f"  resources: {', '.join(appended.resources) or '-'}")
    return lines
