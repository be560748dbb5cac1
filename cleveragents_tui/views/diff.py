"""``agents plan diff`` and the app's diff screen: the correction compared, the decisions it
changed, why a comparison is missing, and each resource's heading. The files' own diffs are
drawn by each interface (plain unified text; coloured syntax and aligned tables)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cleveragents_tui.views.lines import one_line
from cleveragents_tui.views.sections import Row, Section, View

if TYPE_CHECKING:
    from cleveragents_tui.engine.core.diff import CorrectionDiff
    from cleveragents_tui.engine.core.file_diff import ResourceDiff


def diff_view(d: CorrectionDiff) -> View:
    """The heading, the decisions changed (``-`` superseded, ``+`` their replacements) and the
    notes on what is compared."""
    from cleveragents_tui.engine.core.replay_snapshots import NO_AT_DECISION

    c = d.correction
    heading = (
        f"correction {c.correction_id} of decision {c.target_decision_id} · {c.mode.value} · "
        f"{c.status.value} · attempt {c.attempt}"
        + (f" · by {c.requested_by}" if c.requested_by else "")
    )
    changed = [
        *(
            Row("", f"- {r.decision_type}: {one_line(r.chosen_option, 120)}", "bad")
            for r in d.superseded
        ),
        *(
            Row("", f"+ {r.decision_type}: {one_line(r.chosen_option, 120)}", "good")
            for r in d.replacements
        ),
    ]
    notes = []
    if d.unfinished:
        notes.append(Row("", f"({d.unfinished})", "warn"))
    if d.note:
        notes.append(Row("", f"({d.note})", "dim"))
    elif d.at_decision is None:
        notes.append(Row("", f"({NO_AT_DECISION})", "dim"))
    return (
        Section(None, (Row("", heading, "heading"), Row("guidance", c.guidance, "strong"))),
        Section("decisions changed", tuple(changed) or (Row("", "(none)", "dim"),)),
        *([Section(None, tuple(notes))] if notes else []),
    )


def resource_view(r: ResourceDiff) -> View:
    """One resource's heading: its id (and why it has no comparison), the refs compared."""
    return (
        Section(
            f"== {r.resource_id}" + (f" ({r.note})" if r.note else ""),
            (
                Row("", f"{r.old_ref[:12] or '-'} → {r.new_ref[:12] or '-'}", "dim"),
                *([Row("", "(nothing changed)", "dim")] if not r.files and not r.note else []),
            ),
        ),
    )
