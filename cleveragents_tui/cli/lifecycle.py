"""``agents plan use/run/resume/pause/cancel/apply`` and ``agents demo``: running plans."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING

import click

from cleveragents_tui.cli.context import CliContext, echo, format_option, pass_cli
from cleveragents_tui.cli.outcome import finished, refuse_unapplied, report_children, report_plan
from cleveragents_tui.cli.plan import plan
from cleveragents_tui.cli.progress import following, progress_option

if TYPE_CHECKING:  # imported when a command runs, not when the CLI starts
    from cleveragents_tui.domain.plan import Plan


@plan.command()
@click.argument("action_ref", metavar="ACTION")
@click.option(
    "--project", metavar="PROJECT", help="Project the plan belongs to (default: the action's)."
)
@click.option(
    "--automation-profile",
    "profile",
    metavar="PROFILE",
    help="Plan-level profile (highest precedence).",
)
@click.option(
    "--reasoner",
    type=click.Choice(["scripted", "chat"]),
    default=None,
    help="Who makes the decisions: the action's scripted points, or a chat model "
    "(default: core.reasoner, else scripted; --model alone means chat).",
)
@click.option(
    "--model",
    metavar="PROVIDER:MODEL",
    help="The chat model, e.g. openai:gpt-4o-mini (default: core.model). Kept with the plan.",
)
@click.option(
    "--prompt",
    metavar="TEXT",
    help="The task, in place of the action's prompt, for this plan (kept with it): what the "
    "chat model works from.",
)
@progress_option
@pass_cli
def use(
    cli: CliContext,
    action_ref: str,
    project: str | None,
    profile: str | None,
    reasoner: str | None,
    model: str | None,
    prompt: str | None,
) -> None:
    """Create a plan from ACTION (an action file, or an action registered with `agents action
    create`) and run it.

    Pre-flight checks run first; the profile is resolved and locked; then the plan runs
    until its profile asks for a person (an approval) or it is applied.

    With --reasoner chat --model PROVIDER:MODEL a LangChain chat model makes the decisions
    (docs/reasoners.md); the plan keeps the model (not the key) for later runs and replays.
    --prompt "TEXT" gives the plan its task, so one action serves many tasks:

    \b
      agents plan use NAME --model openai:gpt-4o-mini --prompt "Add a README"
    """
    from cleveragents_tui.engine import RunOptions, start_plan
    from cleveragents_tui.engine.core.reasoner_choice import choose
    from cleveragents_tui.engine.setup.actions import load_action, with_prompt
    from cleveragents_tui.engine.setup.uncommitted_notes import left_out

    action = load_action(action_ref, cli.store)
    chosen = choose(cli.store, action, reasoner=reasoner, model=model, project=project)
    action = with_prompt(action, prompt, chat=chosen is not None)
    notes = left_out(cli.store, action)  # a git sandbox starts from the last commit
    with following(cli) as progress:

        def started(plan_id: str) -> None:  # past pre-flight: the plan runs (its children too)
            while notes:
                echo(f"note: {notes.pop(0)}", err=True)
            progress.follow(plan_id)

        result = start_plan(
            cli.store,
            action,
            project=project,
            profile_override=profile,
            options=RunOptions(user=getpass.getuser(), model=chosen, on_start=started),
        )
    refuse_unapplied(cli.store, result)  # constrained or errored: exit 3 or 1 (cli/outcome.py)
    report_plan(cli.store, result)


@plan.command(name="run")
@click.argument("plan_ref", metavar="PLAN")
@progress_option
@pass_cli
def run_(cli: CliContext, plan_ref: str) -> None:
    """Continue PLAN as far as it can go (after approvals were answered, or a pause); retry
    an Apply that was refused (constrained) or failed (errored) once the cause is fixed, or
    one a crash stopped halfway (what landed is kept). Exits 3 if the Apply is refused
    (constrained), 1 if the run errored, with the reason in one line (as `plan apply`)."""
    from cleveragents_tui.engine import RunOptions, resume_plan

    with following(cli, plan_ref) as progress:
        options = RunOptions(user=getpass.getuser(), on_start=progress.follow)  # children too
        result = finished(cli.store, plan_ref, lambda: resume_plan(cli.store, plan_ref, options))
    report_plan(cli.store, result)


@plan.command()
@click.argument("plan_ref", metavar="PLAN")
@click.option(
    "--choose",
    type=int,
    metavar="N",
    help="After a denied decision: take its alternative N (as `approval deny` listed them).",
)
@click.option("--guidance", metavar="TEXT", help="After a denied decision: how to make it.")
@progress_option
@pass_cli
def resume(cli: CliContext, plan_ref: str, choose: int | None, guidance: str | None) -> None:
    """Resume a paused PLAN, or retry its refused Apply (same as `plan run`).

    A plan paused by a denied approval is asked the same question again, unless --choose or
    --guidance says how to make the denied decision instead."""
    from cleveragents_tui.engine import RunOptions
    from cleveragents_tui.engine.run.lifecycle import resume_plan, resume_with

    with following(cli, plan_ref) as progress:
        options = RunOptions(user=getpass.getuser(), on_start=progress.follow)  # children too

        def run() -> Plan:
            if choose is not None or guidance is not None:
                return resume_with(
                    cli.store, plan_ref, choose=choose, guidance=guidance, options=options
                )
            return resume_plan(cli.store, plan_ref, options)

        result = finished(cli.store, plan_ref, run)
    report_plan(cli.store, result)


@plan.command()
@click.argument("plan_ref", metavar="PLAN")
@pass_cli
def pause(cli: CliContext, plan_ref: str) -> None:
    """Pause PLAN; a runner stops before its next decision. Its running child plans pause
    with it, and `agents plan run PLAN` resumes them with it. An Apply cannot be paused."""
    from cleveragents_tui.engine import pause_plan

    result = pause_plan(cli.store, plan_ref, by=getpass.getuser())
    report_plan(cli.store, result)
    report_children(cli.store, result)


@plan.command(name="set-profile")
@click.argument("plan_ref", metavar="PLAN")
@click.argument("profile_name", metavar="PROFILE")
@pass_cli
def set_profile(cli: CliContext, plan_ref: str, profile_name: str) -> None:
    """Change PLAN's automation profile to PROFILE from its next step on.

    A plan's profile is locked when it is created; this is the explicit change. Child plans
    spawned from now on inherit PROFILE; children already created keep theirs. Approvals
    already asked stay asked (answer them with `agents approval`)."""
    from cleveragents_tui.engine.run.plans import change_profile

    report_plan(cli.store, change_profile(cli.store, plan_ref, profile_name))


@plan.command(name="set-model")
@click.argument("plan_ref", metavar="PLAN")
@click.argument("model", metavar="[PROVIDER:MODEL]", required=False)
@click.option("--base-url", metavar="URL", help="The server to ask the model at.")
@pass_cli
def set_model(cli: CliContext, plan_ref: str, model: str | None, base_url: str | None) -> None:
    """Point PLAN at another chat model, or the same model at another server (--base-url),
    from its next run on: its runs, a correction's replay, and the child plans that
    ask its model.

    A plan keeps the model and server it started with; when the server moved (a local one
    on a new port), this is the way on without starting again. Checked as `plan use` checks
    a model (its package, its API key), and recorded in the plan's log."""
    from cleveragents_tui.engine.run.model_change import change_model

    changed, choice = change_model(
        cli.store, plan_ref, model=model, base_url=base_url, by=getpass.getuser()
    )
    report_plan(cli.store, changed)
    at = f" at {choice.base_url}" if choice.base_url else ""
    echo(f"  model: {choice.model}{at}, from its next run on")


@plan.command()
@click.argument("plan_ref", metavar="PLAN")
@pass_cli
def cancel(cli: CliContext, plan_ref: str) -> None:
    """Cancel PLAN and its open child plans (their sandboxes stay until discarded; nothing
    is applied)."""
    from cleveragents_tui.engine import cancel_plan

    result = cancel_plan(cli.store, plan_ref, by=getpass.getuser())
    report_plan(cli.store, result)
    report_children(cli.store, result)


@plan.command()
@click.argument("plan_ref", metavar="PLAN")
@click.option(
    "--as", "who", metavar="NAME", help="Who approves the Apply (default: your user name)."
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="List what Apply would land on each real resource, and change nothing.",
)
@format_option
@progress_option
@pass_cli
def apply(
    cli: CliContext, plan_ref: str, who: str | None, dry_run: bool, local_format: str | None
) -> None:
    """Approve PLAN's Apply gate and land its changes on the real resources.

    On success it names where each resource landed (a git repository: the branch, and the
    `git merge` that takes it). Exit codes: 0 applied; 3 Apply refused (constrained: a real
    resource changed meanwhile, a conflict); 1 Apply failed (errored); 2 a usage error. The
    reason is one line on stderr; the plan stays in Apply to be retried or corrected.

    With --dry-run it answers nothing and lands nothing: it lists, per resource of the plan
    and of the child plans its Apply lands, each change Apply would make (path and kind; a
    database's `table/key` rows), whether Apply would be refused, and who would approve the
    gate (--as NAME, as without --dry-run) — review it before the gate."""
    as_json = cli.wants_json(local_format)
    if dry_run:
        from cleveragents_tui.cli.apply_preview import show_preview

        show_preview(cli, plan_ref, as_json=as_json, who=who)
        return
    from cleveragents_tui.engine import RunOptions, apply_plan

    with following(cli, plan_ref) as progress:
        options = RunOptions(user=who or getpass.getuser(), on_start=progress.follow)
        result = finished(
            cli.store,
            plan_ref,
            lambda: apply_plan(cli.store, plan_ref, who or getpass.getuser(), options),
        )
    report_plan(cli.store, result, as_json=as_json, who=who)
