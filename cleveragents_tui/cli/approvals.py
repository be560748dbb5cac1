"""``agents approval``: the queue of pending human decisions."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING

import click

from cleveragents_tui.cli import json_output
from cleveragents_tui.cli.context import CliContext, echo, echo_json, format_option, pass_cli
from cleveragents_tui.cli.outcome import echo_choices, echo_ready_to_go_on
from cleveragents_tui.views.lines import one_line

QUESTION_CHARS = 1000  # a guard's question, its call and its reason, whole

if TYPE_CHECKING:  # imported when a command runs, not when the CLI starts
    from cleveragents_tui.domain.approval import Approval


@click.group()
def approval() -> None:
    """List and answer pending approvals (escalations, phase gates, budget pauses, ...)."""


@approval.command("list")
@click.option("--plan", "plan_ref", metavar="PLAN", help="Only this plan's approvals.")
@click.option(
    "--all", "answered_too", is_flag=True, help="Answered ones too, with who answered and why."
)
@format_option
@pass_cli
def list_(
    cli: CliContext, plan_ref: str | None, answered_too: bool, local_format: str | None
) -> None:
    """Pending approvals, oldest first (with --all: every approval)."""
    from cleveragents_tui.domain.documents import ApprovalsDocument
    from cleveragents_tui.engine import pending_approvals

    items = pending_approvals(cli.store, plan_ref, answered_too=answered_too)
    if cli.wants_json(local_format):
        echo_json(ApprovalsDocument(approvals=[a.model_dump(mode="json") for a in items]).dump())
        return
    if not items:
        echo("No approvals." if answered_too else "No pending approvals.")
    for a in items:
        echo(
            f"{a.approval_id}  {a.kind.value:<12} plan {a.plan_id}  {one_line(a.question, QUESTION_CHARS)}"
        )
        if "confidence" in a.details:
            echo(
                f"{'':28}confidence {a.details['confidence']} < threshold {a.details['threshold']} "
                f"({a.details.get('flag')}: {a.details.get('gates')})"
            )
        if a.answer is not None:
            why = f": {one_line(a.reason, 200)}" if a.reason else ""
            echo(f"{'':28}{a.answer.value} by {one_line(a.answered_by or '', 80)}{why}")
    if not answered_too and plan_ref is None:
        echo_ready_to_go_on(cli.store)


def _answer(
    cli: CliContext, approval_ref: str, approve: bool, reason: str | None, who: str | None
) -> Approval:
    from cleveragents_tui.engine import answer_approval

    answered = answer_approval(
        cli.store, approval_ref, approve=approve, by=who or getpass.getuser(), reason=reason
    )
    if not json_output.wanted():  # JSON: approve and deny print their documents
        echo(f"{answered.approval_id}: {answered.answer} by {answered.answered_by}")
    return answered


who_option = click.option(
    "--as", "who", metavar="NAME", help="Who answers (default: your user name)."
)


@approval.command()
@click.argument("approval_ref", metavar="APPROVAL")
@click.option("--reason", help="Why (recorded with the answer).")
@who_option
@pass_cli
def approve(cli: CliContext, approval_ref: str, reason: str | None, who: str | None) -> None:
    """Approve APPROVAL; `agents plan run PLAN` then continues the plan from there."""
    from cleveragents_tui.domain.documents import ApprovalDocument

    answered = _answer(cli, approval_ref, True, reason, who)
    if json_output.wanted():
        echo_json(ApprovalDocument(approval=answered.model_dump(mode="json")).dump())
        return
    from cleveragents_tui.domain.approval import ApprovalKind
    from cleveragents_tui.engine.run.children import run_from

    # only the answer is recorded: the plan goes on when it is run again (the app: R) — a
    # child plan's with its parent's run, which runs it on
    go_on = f"agents plan run {run_from(cli.store, answered.plan_id)}"
    if answered.kind is ApprovalKind.APPLY_GATE:  # the run that follows lands it for real
        echo(f"next: land it on the real resources with `{go_on}`")
    else:
        echo(f"next: continue the plan with `{go_on}`")


@approval.command()
@click.argument("approval_ref", metavar="APPROVAL")
@click.option("--reason", required=True, help="Why (recorded with the answer).")
@who_option
@pass_cli
def deny(cli: CliContext, approval_ref: str, reason: str, who: str | None) -> None:
    """Deny APPROVAL (a reason is required). The plan is not cancelled: it pauses where it
    waited, and the choices printed say what can come next (another alternative, guidance
    or a correction, asking again, or `agents plan cancel`)."""
    from cleveragents_tui.domain.documents import ApprovalDocument
    from cleveragents_tui.engine.run.denial import denial_of
    from cleveragents_tui.export.json import plan_json

    answered = _answer(cli, approval_ref, False, reason, who)
    denial = denial_of(cli.store, answered)
    if json_output.wanted():
        echo_json(
            ApprovalDocument(
                approval=answered.model_dump(mode="json"),
                plan=plan_json(denial.plan),
                choices=[{"what": c.what, "command": c.command} for c in denial.choices],
                alternatives=list(denial.alternatives),
            ).dump()
        )
        return
    if not denial.choices:
        return
    plan = denial.plan
    echo(f"plan {plan.plan_id} is paused here ({plan.phase.value}); nothing was cancelled. Next:")
    echo_choices(denial)
