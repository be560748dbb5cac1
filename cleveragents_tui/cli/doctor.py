"""``agents doctor``: check invariants, and repair what a crash left behind."""

from __future__ import annotations

import sys
from dataclasses import asdict

import click

from cleveragents_tui.cli.context import CliContext, echo, echo_json, format_option, pass_cli
from cleveragents_tui.domain.wording import counted


@click.command()
@click.option(
    "--repair",
    is_flag=True,
    help="Drop checkpoint groups a crash left pending, mark corrections it interrupted "
    "failed, finish Applies it stopped halfway and mark plans no process runs any more "
    "paused, then check. Only while no other "
    "agents process runs.",
)
@format_option
@pass_cli
def doctor(cli: CliContext, repair: bool, local_format: str | None) -> None:
    """Check every invariant of the database, the sandboxes and the actor state; exit 1 if
    anything is broken.

    Reports checkpoint groups left pending by a crash, Execute decisions without their
    checkpoint group, gaps in a plan's decisions, broken decision trees and supersessions,
    applied plans changed afterwards, unfinished or inconsistent corrections, plans left
    running with no process running them, checkpoints
    whose git objects, archive objects or savepoints are missing, archive objects that do not
    match their hash, stale lock files, and actor states that do not load
    (docs/reliability.md).
    """
    from cleveragents_tui.domain.documents import DoctorDocument
    from cleveragents_tui.engine.ops.doctor import (
        repair_corrections,
        repair_half_applied,
        repair_left_running,
        run_checks,
    )
    from cleveragents_tui.engine.ops.recovery import recover_pending_groups

    repaired = recover_pending_groups(cli.store) if repair else []
    corrections = repair_corrections(cli.store) if repair else []
    finished = repair_half_applied(cli.store) if repair else []  # before: it would pause them
    paused = repair_left_running(cli.store) if repair else []
    report = run_checks(cli.store)
    if cli.wants_json(local_format):
        echo_json(
            DoctorDocument(
                checkpoints_verified=report.checkpoints_verified,
                checked=report.checked,
                repaired_groups=[asdict(r) for r in repaired],
                repaired_corrections=[asdict(c) for c in corrections],
                repaired_plans=paused,
                finished_applies=[asdict(f) for f in finished],
                problems=[asdict(p) for p in report.problems],
            ).dump()
        )
    else:
        for r in repaired:
            echo(
                f"repaired: pending group {r.group_id} of plan {r.plan_id} "
                f"({counted(len(r.dropped), 'checkpoint')} dropped, {len(r.left)} left)"
            )
        for c in corrections:
            echo(
                f"repaired: correction {c.correction_id} interrupted by a crash marked failed; "
                f"plan {c.plan_id} is errored"
            )
        for f in finished:
            echo(
                f"repaired: plan {f.plan_id}, half-applied by a crash: Apply finished, "
                f"{f.state}" + (f" ({f.reason})" if f.reason else "")
            )
        for plan_id in paused:
            echo(
                f"repaired: plan {plan_id}, left running with no process running it, marked "
                f"paused (go on with `agents plan run {plan_id}`)"
            )
        for p in report.problems:
            echo(f"{p.check}: {p.subject}: {p.message} ({p.fix})")
        if not report.problems:
            echo(
                f"ok: {counted(report.checkpoints_verified, 'checkpoint')} verified, "
                f"{counted(sum(report.checked.values()), 'thing')} checked, no problems found"
            )
    if report.problems:
        sys.exit(1)
