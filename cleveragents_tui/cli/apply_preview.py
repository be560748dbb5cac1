"""``agents plan apply PLAN --dry-run``: what Apply would land, as text or JSON
(engine/read/apply_preview.py reads it; nothing is changed)."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING, Any

from cleveragents_tui.cli.context import CliContext, echo, echo_json
from cleveragents_tui.cli.render import plan_heading

if TYPE_CHECKING:  # imported when the command runs, not when the CLI starts
    from cleveragents_tui.engine.read.apply_preview import (
        ApplyPreview,
        PlanPreview,
        ResourcePreview,
    )


def show_preview(cli: CliContext, plan_ref: str, *, as_json: bool, who: str | None) -> None:
    """``who``: the ``--as NAME`` given — who the real command would approve the Apply gate
    as (else you), repeated in the commands suggested."""
    from cleveragents_tui.domain.display import printable
    from cleveragents_tui.engine.read.apply_preview import preview_apply

    preview = preview_apply(cli.store, plan_ref, by=who or getpass.getuser(), as_name=who)
    if as_json:
        echo_json(document(preview))
        return
    echo(plan_heading(preview.plan))
    if preview.note is not None:
        echo(f"  note: {preview.note}")
    for outside in preview.outside:  # paths someone wrote: escaped, one line
        echo(f"  changed outside the plan: {printable(outside, one_line=True)}")
    if preview.approved_by is not None:
        echo(
            f"  the Apply gate would be approved by {printable(preview.approved_by, one_line=True)}"
        )
    echo("Apply would land (a dry run: nothing was changed):")
    for shown in preview.plans:
        _plan_lines(shown, child=shown.plan_id != preview.plan.plan_id)
    echo(verdict_line(preview))


_REFUSED = "do what each `refused` line above says, or correct the plan"


def verdict_line(preview: ApplyPreview) -> str:
    """The last line: what `plan apply` would do now (``preview.verdict``), and the command."""
    command = preview.command
    if preview.verdict == "asks":
        return (
            "Apply would stop to ask first (exit 0, nothing landed): keep or discard the "
            f"files changed in its sandboxes outside the plan (the question it asks); then: "
            f"{command}"
        )
    if preview.verdict == "reverts":
        return (
            "Apply would not land it: a person approved reverting its refused Apply, so "
            f"`{command}` reverts the plan to Strategize to re-plan"
        )
    if preview.first is not None:
        then = (
            f"then Apply would be refused (exit 3) as things are now: {_REFUSED}"
            if preview.refused
            else f"then land it: {command}"
        )
        return f"first: {preview.first} (until then `plan apply` refuses, exit 2); {then}"
    if preview.refused:
        return f"Apply would be refused (exit 3): {_REFUSED}; then: {command}"
    return f"land it: {command}"


def _plan_lines(shown: PlanPreview, *, child: bool) -> None:
    which = " (child plan)" if child else ""
    echo(f"  plan {shown.plan_id}  {shown.action}{which}")
    if shown.sandbox_host is not None:
        echo(f"    works in the sandboxes of plan {shown.sandbox_host}: landed with them")
    for resource in shown.resources:
        _resource_lines(resource)


def _resource_lines(resource: ResourcePreview) -> None:
    head = f"    {resource.resource_id} ({resource.strategy})"
    if resource.changes is None:
        echo(f"{head}: {resource.note}")
        return
    count = len(resource.changes)
    echo(
        f"{head}: {'no changes' if not count else f'{count} change' + ('' if count == 1 else 's')}"
    )
    from cleveragents_tui.domain.display import printable
    from cleveragents_tui.engine.core.file_diff import shown_path

    for change in resource.changes:  # a name an agent wrote: one line, no control character
        echo(f"      {change.kind.value:<9} {shown_path(change.path)}")
    if resource.refusal is not None:  # it names paths an agent wrote: escaped, one line
        echo(f"      refused   {printable(resource.refusal, one_line=True)}")


def document(preview: ApplyPreview) -> dict[str, Any]:
    from cleveragents_tui.domain.documents import ApplyPreviewDocument
    from cleveragents_tui.engine.core.file_diff import path_json

    return ApplyPreviewDocument(
        plan_id=preview.plan.plan_id,
        phase=preview.plan.phase.value,
        state=preview.plan.state.value,
        at_apply_gate=preview.at_apply_gate,
        note=preview.note,
        plans=[
            {
                "plan_id": shown.plan_id,
                "action": shown.action,
                "sandbox_host": shown.sandbox_host,
                "resources": [
                    {
                        "resource_id": r.resource_id,
                        "strategy": r.strategy,
                        "changes": None
                        if r.changes is None
                        else [{**path_json(c.path), "kind": c.kind.value} for c in r.changes],
                        "note": r.note,
                        "refusal": r.refusal,
                    }
                    for r in shown.resources
                ],
            }
            for shown in preview.plans
        ],
        command=preview.command,
        verdict=preview.verdict,
        first=preview.first,
        approved_by=preview.approved_by,
        outside_changes=list(preview.outside),
    ).dump()
