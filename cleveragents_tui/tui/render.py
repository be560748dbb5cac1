"""Engine read models rendered as ``rich.text.Text`` (never markup: engine and user text may
contain ``[`` and ``]``), with every control character shown escaped (:func:`safe_text`):
Textual passes ``ESC`` through to the terminal, so a decision's text could otherwise set
the window title or write the clipboard."""

from __future__ import annotations

from rich.text import Text

from cleveragents_tui.domain.checkpoint import CheckpointGroup
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.plan import Plan
from cleveragents_tui.domain.views import DecisionExplanation, TreeRow

SUPERSEDED = "✗ "
CORRECTION = "↻ "
CHECKPOINT = " ⚑"

STATE_STYLE = {
    "running": "bold green",
    "awaiting_approval": "bold yellow",
    "paused": "yellow",
    "completed": "green",
    "applied": "bold blue",
    "cancelled": "dim",
    "errored": "bold red",
    "constrained": "red",
    "created": "",
}


PHASE_STYLE = {"strategize": "blue", "execute": "magenta", "apply": "green"}


def one_line(text: str, limit: int = 60) -> str:
    first = printable(" ".join(text.split()), one_line=True)
    return first if len(first) <= limit else first[: limit - 1] + "…"


def readable(value: object, limit: int = 120) -> str:
    """A stored value (event payloads, approval details) as a person reads it: a list as
    items joined by commas, a mapping as ``key value`` pairs, never a Python repr."""
    if isinstance(value, dict):
        text = ", ".join(f"{k} {readable(v, limit)}" for k, v in value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        text = ", ".join(readable(v, limit) for v in value) or "none"
    elif isinstance(value, float):
        text = f"{value:g}"
    else:
        text = str(value)
    return one_line(text, limit)


def safe_text(text: Text | str, *, one_line: bool = False) -> Text:
    """``text`` with its control characters escaped (:func:`printable`) and its styles kept:
    what every widget that shows a user's, an agent's or a file's text is given."""
    if isinstance(text, str):
        return Text(printable(text, one_line=one_line))
    cuts = sorted({0, len(text), *(o for span in text.spans for o in (span.start, span.end))})
    out = text.blank_copy()
    for piece in text.divide(cuts):  # each piece lies wholly inside or outside each span
        start = len(out)
        out.append(printable(piece.plain, one_line=one_line))
        for span in piece.spans:
            out.stylize(span.style, start, len(out))
    return out


def short(ulid: str | None, n: int = 10) -> str:
    return ulid[:n] if ulid else "-"


def state_text(state: str) -> Text:
    return Text(state, style=STATE_STYLE.get(state, ""))


def plan_heading(plan: Plan) -> Text:
    t = Text()
    t.append(plan.action, style="bold")
    t.append(f" · {plan.phase.value} · ")
    t.append_text(state_text(plan.state.value))
    t.append(f" · attempt {plan.attempt} · profile {plan.automation_profile}")
    t.append(f" · {plan.plan_id}", style="dim")
    return safe_text(t, one_line=True)


def tree_label(row: TreeRow, checkpoint: bool, affected: bool) -> Text:
    t = Text(no_wrap=True, overflow="ellipsis")
    t.append(f"{row.phase[:1].upper()} ", style=PHASE_STYLE.get(row.phase, "dim"))
    if row.superseded_by:
        t.append(SUPERSEDED, style="red")
    elif row.is_correction:
        t.append(CORRECTION, style="cyan")
    style = "dim strike" if row.superseded_by else ""
    t.append(row.decision_type, style=f"bold {style}".strip())
    t.append("  ")
    t.append(one_line(row.chosen_option, 48), style=style)
    if row.confidence_score is not None:
        t.append(f"  {row.confidence_score:.2f}", style="dim")
    if checkpoint:
        t.append(CHECKPOINT, style="magenta")
    if affected:
        t.stylize("reverse yellow")
    return safe_text(t, one_line=True)


def _field(t: Text, label: str, value: str | None) -> None:
    t.append(f"{label:<13}", style="bold")
    t.append(value if value not in (None, "") else "-")
    t.append("\n")


def _ref(d: Decision) -> str:
    return f"{d.decision_id}  {d.decision_type.value}: {one_line(d.chosen_option)}"


def explanation(e: DecisionExplanation, group: CheckpointGroup | None) -> Text:
    """Everything ``agents plan explain`` shows, plus the checkpoint group."""
    d = e.decision
    snap = d.context_snapshot
    t = Text()
    t.append(f"{d.decision_type.value}", style="bold underline")
    t.append(f" · {d.phase.value} · #{d.sequence_number}\n", style="bold")
    t.append(f"{d.decision_id}\n", style="dim")
    if d.superseded_by:
        t.append("✗ superseded", style="bold red")
        t.append(f" by {_ref(e.superseded_by) if e.superseded_by else d.superseded_by}\n")
    if d.is_correction:
        t.append("↻ correction", style="bold cyan")
        t.append(f" of {d.corrects_decision_id}\n")
    _field(t, "parent", _ref(e.parent) if e.parent else "(root)")
    t.append("\n")
    _field(t, "question", d.question)
    _field(t, "chosen", d.chosen_option)
    _field(t, "alternatives", "; ".join(d.alternatives_considered))
    _field(t, "confidence", None if d.confidence_score is None else f"{d.confidence_score:.2f}")
    _field(t, "rationale", d.rationale)
    _field(t, "reasoning", d.actor_reasoning)
    _field(t, "created", d.created_at.isoformat(timespec="seconds"))
    if d.is_correction:
        _field(t, "reason", d.correction_reason)
    t.append("\ndownstream impact\n", style="bold")
    impact_lines = [
        *(f"  depends on it: {ref}" for ref in e.dependents),
        *(f"  child plan:    {ref}" for ref in d.downstream_plan_ids),
        *(f"  artifact:      {a.artifact_path} ({a.artifact_type})" for a in d.artifacts_produced),
        *(
            f"  child:         {c.decision_id}  {c.decision_type}: {one_line(c.chosen_option)}"
            for c in e.children
        ),
    ]
    t.append("\n".join(impact_lines) if impact_lines else "  (nothing depends on this decision)")
    t.append("\n")
    if e.depends_on:
        t.append("depends on\n", style="bold")
        t.append("\n".join(f"  {ref}" for ref in e.depends_on) + "\n")
    resources = ", ".join(
        r.resource_id + (f":{r.path}" if r.path else "") for r in snap.relevant_resources
    )
    actor = snap.actor_state_ref
    t.append("\ncontext\n", style="bold")
    t.append(f"  hash          {snap.hot_context_hash or '-'}\n")
    t.append(f"  resources     {resources or '-'}\n")
    t.append(
        f"  actor state   {f'thread {actor.thread_id} checkpoint {actor.checkpoint_id}' if actor else '-'}\n"
    )
    t.append("\ncheckpoint group\n", style="bold")
    if group is None:
        t.append("  (none: this decision changed no resource)\n", style="dim")
    else:
        t.append(f"  {group.group_id}  {group.status.value}\n")
    for c in e.checkpoints:
        t.append(f"  ⟲ {c.resource_id}  {c.strategy.value}  {c.checkpoint_type.value}  ")
        t.append(f"{c.ref}\n", style="dim")
    if e.tool_invocations:
        t.append("\ntool invocations\n", style="bold")
        for call in e.tool_invocations:
            effects = ", ".join(call.side_effects) or "no declared side effects"
            t.append(f"  {call.tool}  ({effects})")
            if call.irreversible:
                t.append("  ⚠ irreversible", style="bold red")
            t.append("\n")
    return safe_text(t)
