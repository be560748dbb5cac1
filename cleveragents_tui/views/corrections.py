"""A plan's corrections, one line each: what `agents plan show` lists under ``corrections``
and the app's corrections list (`C`) shows, with a failed one's reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.enums import CorrectionStatus

if TYPE_CHECKING:
    from cleveragents_tui.domain.correction import CorrectionAttempt


def correction_line(correction: CorrectionAttempt, went_on: bool) -> str:
    """``01J…  revert of 01J… · succeeded · attempt 2 · by ana``, a failed one's reason
    after it. ``went_on``: the plan is no longer errored (a run took it on after)."""
    c = correction
    return (
        f"{c.correction_id}  {c.mode.value} of {c.target_decision_id} · {c.status.value} · "
        f"attempt {c.attempt}"
        + (f" · by {c.requested_by}" if c.requested_by else "")
        + why_failed(c, went_on)
    )


def why_failed(correction: CorrectionAttempt, went_on: bool) -> str:
    """A failed correction's reason, one line (``: …``); a replay that failed, then went on
    with a run (the plan no longer errored), says so: the corrected decisions stand."""
    if correction.status is not CorrectionStatus.FAILED:
        return ""
    report = correction.report
    error = str(report.get("error") or "")
    failed = [  # a rollback that failed: its first resource that did not roll back
        r
        for r in report.get("resources", [])
        if isinstance(r, dict) and r.get("outcome") == "failed"
    ]
    if not error and failed:
        detail = failed[0].get("detail")
        error = f"{failed[0].get('resource_id')} did not roll back" + (
            f" ({detail})" if detail else ""
        )
    said = f": {shorten(' '.join(error.split()), 160)}" if error else ""
    if report.get("replay") == "failed" and went_on:
        said += "; the plan went on after it (plan run)"
    return said
