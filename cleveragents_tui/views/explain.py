"""``agents plan explain`` and the app's details panel: one decision, as sections."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cleveragents_tui.domain.call_text import arguments_line
from cleveragents_tui.domain.display import printable
from cleveragents_tui.views.lines import decision_ref, one_line, row_ref
from cleveragents_tui.views.plan import SUPERSEDED
from cleveragents_tui.views.sections import Row, Section, View, filled

if TYPE_CHECKING:
    from cleveragents_tui.domain.checkpoint import CheckpointGroup
    from cleveragents_tui.domain.tool import ToolInvocation
    from cleveragents_tui.domain.views import DecisionExplanation, TreeRow


def explanation_view(e: DecisionExplanation, group: CheckpointGroup | None) -> View:
    """Everything known about a decision: what it chose and why, what depends on it, the
    context it was made in, its checkpoint group and its tool invocations."""
    d = e.decision
    head = [
        Row(
            "",
            f"decision {d.decision_id} · {d.decision_type.value} · {d.phase.value} · "
            f"#{d.sequence_number}",
            "heading",
        )
    ]
    if d.superseded_by:
        replaced = decision_ref(e.superseded_by) if e.superseded_by else d.superseded_by
        head.append(Row("✗ superseded by", replaced, "bad"))
    if d.is_correction:
        head.append(Row("↻ correction of", filled(d.corrects_decision_id), "accent"))
    head += [
        Row("plan", f"{e.plan.plan_id}  {one_line(e.plan.action)}"),
        Row("parent", decision_ref(e.parent) if e.parent else "(root)"),
    ]
    confidence = None if d.confidence_score is None else f"{d.confidence_score:.2f}"
    fields = [
        Row("question", filled(d.question)),
        Row("chosen", filled(d.chosen_option), "strong"),
        Row("alternatives", filled("; ".join(d.alternatives_considered))),
        Row("confidence", filled(confidence)),
        Row("rationale", filled(d.rationale)),
        Row("reasoning", filled(d.actor_reasoning)),
        Row("created", d.created_at.isoformat(timespec="seconds")),
    ]
    if d.is_correction:
        fields.append(Row("reason", filled(d.correction_reason)))
    return (
        Section(None, tuple(head)),
        Section(None, tuple(fields)),
        Section("downstream impact", _impact(e)),
        *(
            [Section("depends on", tuple(Row("", ref) for ref in e.depends_on))]
            if e.depends_on
            else []
        ),
        _context(e),
        _checkpoints(e, group),
        *_tools(e),
    )


def _impact(e: DecisionExplanation) -> tuple[Row, ...]:
    d = e.decision
    rows = [
        *(Row("depends on it", ref) for ref in e.dependents),
        *(Row("child plan", ref) for ref in d.downstream_plan_ids),
        *(Row("artifact", f"{a.artifact_path} ({a.artifact_type})") for a in d.artifacts_produced),
        *(_child(c) for c in e.children),
    ]
    return tuple(rows) or (Row("", "(nothing depends on this decision)", "dim"),)


def _child(row: TreeRow) -> Row:
    """A child decision; a superseded one marked as the tree marks it (it is history, not
    what depends on the decision now)."""
    if row.superseded_by is None:
        return Row("child", row_ref(row))
    return Row("child", f"{SUPERSEDED}{row_ref(row)}  [superseded by {row.superseded_by}]", "dim")


def _context(e: DecisionExplanation) -> Section:
    snap = e.decision.context_snapshot
    resources = ", ".join(
        r.resource_id + (f":{r.path}" if r.path else "") for r in snap.relevant_resources
    )
    actor = snap.actor_state_ref
    state = f"thread {actor.thread_id} checkpoint {actor.checkpoint_id}" if actor else None
    return Section(
        "context",
        (
            Row("hash", filled(snap.hot_context_hash), "dim"),
            Row("ref", filled(snap.hot_context_ref), "dim"),
            Row("resources", filled(resources)),
            Row("actor state", filled(state)),
        ),
    )


def _checkpoints(e: DecisionExplanation, group: CheckpointGroup | None) -> Section:
    rows = [
        Row("", "(none: this decision changed no resource)", "dim")
        if group is None
        else Row("", f"{group.group_id}  {group.status.value}")
    ]
    rows += [
        Row(
            "",
            f"⚑ {c.resource_id}  {c.strategy.value}  {c.checkpoint_type.value}  {c.ref}",
            "accent",
        )
        for c in e.checkpoints
    ]
    if group is not None and not e.checkpoints:  # the first Execute decision's, typically
        rows.append(
            Row(
                "",
                "(no resource was written before it: a revert goes back to where each began)",
                "dim",
            )
        )
    return Section("checkpoint group", tuple(rows))


def _tools(e: DecisionExplanation) -> list[Section]:
    if not e.tool_invocations:
        return []
    rows = []
    for call in e.tool_invocations:
        effects = ", ".join(call.side_effects) or "no declared side effects"
        line = f"{call.tool}  ({effects})"
        rows.append(
            Row("", line + "  ⚠ irreversible", "bad") if call.irreversible else Row("", line)
        )
        rows.append(Row("", f"  {arguments_line(call.arguments)}", "dim"))
        rows += _outcome(call)
    return [Section("tool invocations", tuple(rows))]


OUTPUT_LINES = 12  # of a failed call's output: the test runner's last lines say why
READ_LINES = 8  # of a read's output after its first line: what the actor was shown


def _outcome(call: ToolInvocation) -> list[Row]:
    """How the call went — ``✓`` or ``✗`` and its output's first line (``exit status 1``) —
    and, for a read, its next lines (the matches, the rows, the file: what the actor decided
    on), for a failed call the output's last lines (why a test run failed)."""
    if call.ok is None:
        return []
    lines = [_output_line(line) for line in (call.output or "").splitlines() if line.strip()]
    first = lines[0] if lines else "(no output)"
    if call.ok and _reads_only(call):
        shown = lines[1 : 1 + READ_LINES]
        more = len(lines) - 1 - len(shown)
        return [
            Row("", f"  ✓ {first}", "dim"),
            *(Row("", f"    {line}", "dim") for line in shown),
            *([Row("", f"    … {more} more lines", "dim")] if more > 0 else []),
        ]
    if call.ok:
        return [Row("", f"  ✓ {first}", "dim")]
    rest = lines[1:][-OUTPUT_LINES:]
    skipped = len(lines) - 1 - len(rest)
    return [
        Row("", f"  ✗ failed: {first}", "bad"),
        *([Row("", f"    … {skipped} lines before these", "dim")] if skipped else []),
        *(Row("", f"    {line}", "dim") for line in rest),
    ]


def _reads_only(call: ToolInvocation) -> bool:
    return bool(call.side_effects) and all(e.startswith("reads:") for e in call.side_effects)


def _output_line(line: str, limit: int = 100) -> str:
    """One line of a call's output, its indentation kept (a test runner's ``? ^^^`` points
    under the line above), controls escaped, cut with ``…``."""
    shown = printable(line.rstrip().expandtabs(4), one_line=True)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
