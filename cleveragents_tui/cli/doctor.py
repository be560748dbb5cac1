"""``agents doctor``: check invariants, and repair what a crash left behind."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from cleveragents_tui.cli.context import CliContext, echo, echo_json, format_option, pass_cli
from cleveragents_tui.domain.wording import counted

if TYPE_CHECKING:  # the engine is imported when the command runs
    from cleveragents_tui.engine.ops.doctor import Problem


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
        _echo_problems(report.problems)
        if not report.problems:
            echo(
                f"ok: {counted(report.checkpoints_verified, 'checkpoint')} verified, "
                f"{counted(sum(report.checked.values()), 'thing')} checked, no problems found"
            )
    if report.problems:
        sys.exit(1)


SHOWN_PER_CHECK = 20  # a store broken one way can report a problem for each of 100,000 rows


def _echo_problems(problems: Sequence[Problem]) -> None:
    """Each problem on a line, at most :data:`SHOWN_PER_CHECK` of one check, then how many
    more; the JSON lists them all."""
    by_check: dict[str, list[Problem]] = {}
    for problem in problems:
        by_check.setdefault(problem.check, []).append(problem)
    for check, found in by_check.items():
        for p in found[:SHOWN_PER_CHECK]:
            echo(f"{p.check}: {p.subject}: {p.message} ({p.fix})")
        if len(found) > SHOWN_PER_CHECK:
            more = len(found) - SHOWN_PER_CHECK
            echo(f"{check}: … and {more:,} more (agents doctor --format=json lists them all)")
