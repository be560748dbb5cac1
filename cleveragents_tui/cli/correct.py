"""``agents plan correct`` and ``agents plan diff --correction``."""

from __future__ import annotations

import difflib
import gc
import getpass
import sys
from typing import TYPE_CHECKING

import click

from cleveragents_tui.cli.context import CliContext, echo, echo_json, format_option, pass_cli
from cleveragents_tui.cli.outcome import report_plan
from cleveragents_tui.cli.plan import plan
from cleveragents_tui.cli.progress import following, progress_option
from cleveragents_tui.cli.render import plan_heading
from cleveragents_tui.domain.errors import UserError

if TYPE_CHECKING:  # the engine is imported when a command runs, not at start-up
    from cleveragents_tui.engine import Impact
    from cleveragents_tui.engine.core.file_diff import ResourceDiff


def _freeze_what_is_loaded() -> None:
    """What the command has loaded (modules, the ORM, then the preview) lives until it exits:
    frozen, the full collections that loading a large plan's rows and the correction's
    writes set off no longer traverse it (docs/benchmarks.md, "A command's correction over
    a frozen heap")."""
    gc.freeze()


def _impact_text(cli: CliContext, impact: Impact) -> str:
    """The preview as the app's impact modal shows it (views/impact.py), the superseded
    decisions named from their rows."""
    from cleveragents_tui.engine.read.browse import decision_rows
    from cleveragents_tui.views.impact import impact_view
    from cleveragents_tui.views.sections import to_plain_text

    rows = decision_rows(cli.store, impact.affected_decisions)
    return to_plain_text(impact_view(impact, rows.get))


def _impact_json(impact: object, requested_by: str) -> dict[str, object]:
    from dataclasses import asdict

    from cleveragents_tui.domain.documents import CorrectionPreviewDocument

    data = _plain(asdict(impact))  # type: ignore[call-overload]
    assert isinstance(data, dict)
    return CorrectionPreviewDocument.model_validate({**data, "requested_by": requested_by}).dump()


def _requested_by_line(requested_by: str, warnings: int) -> str:
    """Who the correction would be requested by (``--as NAME``, else you): the person
    whose confirmation of the warnings ``--yes`` stands for."""
    from cleveragents_tui.domain.display import printable
    from cleveragents_tui.domain.wording import counted

    who = printable(requested_by, one_line=True)  # a name someone typed: one line, escaped
    confirms = f", who confirms the {counted(warnings, 'warning')} below" if warnings else ""
    return f"\nthe correction would be requested by {who}{confirms}"


def _plain(value: object) -> object:
    from enum import Enum

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    return value


@plan.command()
@click.argument("decision_ref", metavar="DECISION")
@click.option(
    "--mode",
    type=click.Choice(["revert", "append"]),
    required=True,
    help="revert: roll back what depended on the decision and replay; append: add a corrective plan.",
)
@click.option("--guidance", required=True, help="What the decision should have been.")
@click.option(
    "--choose",
    type=int,
    metavar="N",
    help="Take alternative N (1-based, as --dry-run lists them) instead of the one the guidance "
    "selects; needed when the guidance selects none.",
)
@click.option(
    "--plan", "plan_ref", metavar="PLAN", help="Fail unless the decision belongs to this plan."
)
@click.option("--yes", is_flag=True, help="Confirm every warning (for scripts).")
@click.option(
    "--outside-changes",
    type=click.Choice(["keep", "discard"]),
    help="Files changed outside the plan in a sandbox the revert rolls back: keep them (put "
    "back on top before the replay) or discard them. Needed with --yes when there are any.",
)
@click.option("--dry-run", is_flag=True, help="Print the impact only; change nothing.")
@click.option(
    "--as", "who", metavar="NAME", help="Who asks for the correction (default: your user name)."
)
@format_option
@progress_option
@pass_cli
def correct(
    cli: CliContext,
    decision_ref: str,
    mode: str,
    guidance: str,
    choose: int | None,
    plan_ref: str | None,
    yes: bool,
    outside_changes: str | None,
    dry_run: bool,
    who: str | None,
    local_format: str | None,
) -> None:
    """Correct DECISION: preview the impact, confirm the warnings, then roll back and replay
    (revert) or append a corrective plan (append)."""
    from cleveragents_tui.domain.enums import CorrectionMode
    from cleveragents_tui.engine import preview

    _freeze_what_is_loaded()
    impact = preview(cli.store, decision_ref, CorrectionMode(mode), guidance, plan_ref, choose)
    _dry_run_or_execute(
        cli, impact, dry_run=dry_run, yes=yes, who=who, fmt=local_format, outside=outside_changes
    )


def _dry_run_or_execute(
    cli: CliContext,
    impact: Impact,
    *,
    dry_run: bool,
    yes: bool,
    who: str | None,
    fmt: str | None,
    outside: str | None = None,
) -> None:
    """``--dry-run``: print the impact and its warnings; otherwise confirm and run it —
    refused (exit 2, nothing changed) while the guidance selects none of the alternatives
    and none was named with --choose, or while files changed outside the plan would be
    rolled back and --yes stands in for the keep-or-discard answer."""
    as_json = cli.wants_json(fmt)
    found = impact.alternatives
    if not dry_run and found is not None and found.selected is None:
        from cleveragents_tui.engine.correct.guidance import refusal

        raise refusal(impact.decision_id, impact.guidance, found)
    if not dry_run and impact.outside_changes and outside is None and yes:
        from cleveragents_tui.engine.correct.preview import outside_refusal

        raise outside_refusal(impact)
    if not dry_run:
        _confirm_and_execute(cli, impact, yes=yes, who=who, as_json=as_json, outside=outside)
        return
    requested_by = who or getpass.getuser()  # as the correction itself would record it
    if as_json:
        echo_json(_impact_json(impact, requested_by))
    else:
        echo(_impact_text(cli, impact))
        echo(_requested_by_line(requested_by, len(impact.warnings)))
        for warning in impact.warnings:
            echo("\n" + warning)


def _confirm_and_execute(
    cli: CliContext,
    impact: Impact,
    *,
    yes: bool,
    who: str | None,
    as_json: bool,
    outside: str | None,
) -> None:
    """Show the impact, ask each warning y/N (unless --yes) and keep/discard/cancel for
    files changed outside the plan (unless --outside-changes), run the correction, report
    it; exit 1 when a question is declined or the correction did not succeed."""
    from cleveragents_tui.domain.documents import CorrectionDocument
    from cleveragents_tui.engine import OutsideChoice, RunOptions, execute
    from cleveragents_tui.engine.correct.model import CorrectionIncompleteError

    if not as_json:
        echo(_impact_text(cli, impact))
    for warning in impact.warnings:
        if yes:
            continue
        echo("\n" + warning, err=as_json)
        if not click.confirm("", default=False, err=as_json):
            echo("Correction cancelled: nothing was changed.", err=True)
            sys.exit(1)
    if impact.outside_changes and outside is None:
        outside = click.prompt(
            "\nFiles changed outside the plan: keep them, discard them, or cancel?",
            type=click.Choice(["keep", "discard", "cancel"]),
            default="cancel",
            err=as_json,
        )
        if outside == "cancel":
            echo("Correction cancelled: nothing was changed.", err=True)
            sys.exit(1)
    _freeze_what_is_loaded()
    try:
        with following(cli, impact.plan_id) as progress:
            result = execute(
                cli.store,
                impact,
                acknowledged=True,
                requested_by=who or getpass.getuser(),
                outside=OutsideChoice(outside) if outside else None,
                options=RunOptions(user=who or getpass.getuser(), on_start=progress.follow),
            )
    except CorrectionIncompleteError as exc:
        echo(f"correction failed: {exc}", err=True)
        sys.exit(1)
    if as_json:
        echo_json(
            CorrectionDocument(
                correction=result.correction.model_dump(mode="json"),
                plan=result.plan.model_dump(mode="json"),
            ).dump()
        )
        return
    c = result.correction
    echo(f"\ncorrection {c.correction_id}: {c.status.value} (attempt {c.attempt})")
    if result.report is not None:
        for r in result.report.resources:
            echo(f"  {r.resource_id}: {r.outcome.value}" + (f" ({r.detail})" if r.detail else ""))
    if c.report.get("replay") == "failed":  # the correction is made, its replay stopped
        error, go_on = str(c.report["error"]), f"agents plan run {c.plan_id}"
        made = "the decisions stay corrected"
        if c.appended_plan_id is not None:  # an append: its plan is made, its run stopped
            go_on, made = f"agents plan run {c.appended_plan_id}", "the appended plan stays"
        fix = "" if go_on in error else f": fix the cause, then go on with `{go_on}`"
        echo(f"  {error}; {made}{fix}")
    report_plan(cli.store, result.plan, as_json=False, who=who)  # and what it waits for
    if c.appended_plan_id is not None:
        _echo_appended(cli, c.appended_plan_id)
    if c.status.value == "succeeded":
        echo(f"compare the attempts: agents plan diff --correction {c.correction_id}")
    else:
        sys.exit(1)


def _echo_appended(cli: CliContext, plan_id: str) -> None:
    """Where the appended plan stopped, and how to land it when it lands on its own."""
    with cli.store.unit_of_work() as uow:
        appended = uow.plans.get(plan_id)
        gated = any(a.kind.value == "apply_gate" for a in uow.approvals.pending(plan_id))
    echo("appended " + plan_heading(appended))
    if gated:
        echo(f"  land it: agents plan apply {plan_id}")


@plan.command("edit-strategy")
@click.argument("decision_ref", metavar="DECISION")
@click.option(
    "--to", "new_strategy", required=True, metavar="TEXT", help="The strategy to take instead."
)
@click.option(
    "--choose",
    type=int,
    metavar="N",
    help="Take alternative N (1-based, as --dry-run lists them); needed when TEXT selects none.",
)
@click.option(
    "--plan", "plan_ref", metavar="PLAN", help="Fail unless the decision belongs to this plan."
)
@click.option("--yes", is_flag=True, help="Confirm every warning (for scripts).")
@click.option("--dry-run", is_flag=True, help="Print the impact only; change nothing.")
@click.option("--as", "who", metavar="NAME", help="Who edits (default: your user name).")
@format_option
@progress_option
@pass_cli
def edit_strategy(
    cli: CliContext,
    decision_ref: str,
    new_strategy: str,
    choose: int | None,
    plan_ref: str | None,
    yes: bool,
    dry_run: bool,
    who: str | None,
    local_format: str | None,
) -> None:
    """Edit a strategy decision before Execute starts: DECISION (a Strategize decision of a
    plan still in Strategize, e.g. waiting at its "Start Execute?" gate) is replaced by TEXT,
    the strategy actor decides again under it, and the gates are asked again.

    Recorded as a revert correction with TEXT as its guidance, so the old choice stays in the
    history. After Execute has started use `agents plan correct`, which rolls Execute back.
    """
    from cleveragents_tui.engine.correct.strategy import preview_strategy_edit

    _freeze_what_is_loaded()
    impact = preview_strategy_edit(cli.store, decision_ref, new_strategy, plan_ref, choose)
    _dry_run_or_execute(cli, impact, dry_run=dry_run, yes=yes, who=who, fmt=local_format)


@plan.command()
@click.argument("plan_ref", metavar="[PLAN]", required=False)
@click.option(
    "--correction",
    "correction_ref",
    metavar="CORRECTION",
    help="The correction attempt whose old and new attempts to compare (default: PLAN's latest).",
)
@click.option("--side-by-side", is_flag=True, help="Two columns instead of a unified diff.")
@format_option
@pass_cli
def diff(
    cli: CliContext,
    plan_ref: str | None,
    correction_ref: str | None,
    side_by_side: bool,
    local_format: str | None,
) -> None:
    """Compare the attempt a correction replaced with the new one: decisions and files.

    Give PLAN for its latest correction, or --correction C for any one (`agents plan show
    PLAN` lists them). The snapshots compared were recorded by the correction itself
    (docs/corrections.md, "Diffs"), so a correction's diff is the same whenever it is asked
    for."""
    from cleveragents_tui.domain.documents import CorrectionDiffDocument
    from cleveragents_tui.engine.core.diff import correction_diff, latest_correction
    from cleveragents_tui.engine.core.replay_snapshots import AT_DECISION, FINAL
    from cleveragents_tui.views.diff import diff_view
    from cleveragents_tui.views.sections import to_plain_text

    match plan_ref, correction_ref:
        case str(), None:
            result = correction_diff(cli.store, latest_correction(cli.store, plan_ref))
        case None, str():
            result = correction_diff(cli.store, correction_ref)
        case None, None:
            raise UserError(
                "no correction named", "give a plan (its latest correction) or --correction C"
            )
        case _:
            raise UserError("both a plan and --correction given", "give one of them")
    if cli.wants_json(local_format):
        from cleveragents_tui.export.json import correction_json

        echo_json(
            CorrectionDiffDocument(
                correction=correction_json(result.correction),
                superseded=[r.decision_id for r in result.superseded],
                replacements=[r.decision_id for r in result.replacements],
                note=result.note,
                unfinished=result.unfinished,
                resources=_json_resources(result.final),
                at_decision=(
                    None if result.at_decision is None else _json_resources(result.at_decision)
                ),
            ).dump()
        )
        return
    echo(to_plain_text(diff_view(result)))  # what the app's diff screen shows (views/diff.py)
    sections = [] if result.at_decision is None else [(AT_DECISION, result.at_decision)]
    for title, resources in [*sections, (FINAL, result.final)]:
        echo(f"\n### {title}")
        if not resources:
            echo("(no resource was rolled back by this correction)")
        for resource in resources:
            _echo_resource(resource, side_by_side)


def _json_resources(resources: list[ResourceDiff]) -> list[dict[str, object]]:
    from cleveragents_tui.engine.core.file_diff import path_json

    return [
        {
            "resource_id": r.resource_id,
            "old_ref": r.old_ref,
            "new_ref": r.new_ref,
            "note": r.note,
            "changes": [
                {
                    **path_json(f.change.path),
                    "kind": f.change.kind.value,
                    "summary": f.summary,
                }
                for f in r.files
            ],
        }
        for r in resources
    ]


def _echo_resource(resource: ResourceDiff, side_by_side: bool) -> None:
    """One resource's changed files: never raw bytes, never a control character."""
    from cleveragents_tui.domain.display import printable
    from cleveragents_tui.engine.core.file_diff import shown_path
    from cleveragents_tui.views.diff import resource_view
    from cleveragents_tui.views.sections import to_plain_text

    echo("\n" + to_plain_text(resource_view(resource)))
    for f in resource.files:
        path = shown_path(f.change.path)  # one line, whatever the name holds
        if f.summary is not None:
            echo(f"--- {path} ({f.change.kind.value})")
            echo(f"  ({f.summary})")
            continue
        old = [printable(line) for line in (f.old or "").splitlines()]
        new = [printable(line) for line in (f.new or "").splitlines()]
        if side_by_side:
            width = 60
            echo(f"--- {path} ({f.change.kind.value})")
            for left, right in _pairs(old, new):
                echo(f"{left[:width]:<{width}} | {right[:width]}")
        else:
            for line in difflib.unified_diff(old, new, f"old/{path}", f"new/{path}", lineterm=""):
                echo(line)


def _pairs(old: list[str], new: list[str]) -> list[tuple[str, str]]:
    size = max(len(old), len(new))
    return [(old[i] if i < len(old) else "", new[i] if i < len(new) else "") for i in range(size)]
