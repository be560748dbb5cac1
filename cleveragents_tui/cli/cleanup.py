"""``agents plan discard`` and ``agents gc``: give back the disk plans take."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cleveragents_tui.cli.context import CliContext, echo, echo_json, format_option, pass_cli
from cleveragents_tui.cli.plan import plan

if TYPE_CHECKING:  # the engine is imported when a command runs, not when the CLI starts
    from cleveragents_tui.engine.ops.cleanup import DiscardInventory


def human_size(size: int) -> str:
    """``size`` bytes as B, KB, MB or GB (powers of 1024)."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if value < 1024 or unit == "GB":
            break
    return f"{value:.1f} {unit}"


@plan.command()
@click.argument("plan_ref", metavar="PLAN")
@click.option("--yes", "-y", is_flag=True, help="Discard without asking.")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@format_option
@pass_cli
def discard(
    cli: CliContext, plan_ref: str, yes: bool, dry_run: bool, local_format: str | None
) -> None:
    """Remove PLAN's sandboxes, checkpoints and apply branches, and its child plans'.

    Lists what goes and asks first. A plan not finished yet is cancelled. The decision
    tree, corrections and their diffs stay browsable; the plan can no longer be corrected
    or applied. Your checkout (HEAD, index, working tree) is never touched; an apply branch
    you have not merged is named as such, as its commit is lost with it.
    """
    from cleveragents_tui.engine.ops.cleanup import discard_inventory, discard_plan

    inventory = discard_inventory(cli.store, plan_ref)
    as_json = cli.wants_json(local_format)
    if not as_json or not yes or dry_run:
        _list(inventory, err=as_json)
    if dry_run:
        if as_json:
            echo_json(_document(inventory, done=False))
        return
    if not yes and not click.confirm("Discard?", default=False, err=as_json):
        raise click.Abort
    freed = discard_plan(cli.store, inventory)
    if as_json:
        echo_json(_document(inventory, done=True))
    else:
        echo(f"discarded plan {inventory.plan_id}: {human_size(freed)} of sandboxes removed")


def _list(inventory: DiscardInventory, *, err: bool) -> None:
    echo(f"Discarding plan {inventory.plan_id} removes:", err=err)
    for plan_id in inventory.cancels:
        echo(f"  cancels plan {plan_id} (not finished)", err=err)
    for folder in inventory.sandboxes:
        echo(
            f"  sandbox of {folder.resource_id} (plan {folder.plan_id}): {human_size(folder.size)}",
            err=err,
        )
    for branch in inventory.branches:
        state = "merged" if branch.merged else "NOT merged: its commit is lost"
        echo(f"  branch {branch.branch} in {branch.repository} ({state})", err=err)
    echo(f"  {inventory.checkpoints} checkpoints (marked pruned; the decision tree stays)", err=err)


def _document(inventory: DiscardInventory, *, done: bool) -> dict[str, object]:
    from cleveragents_tui.domain.documents import DiscardDocument

    return DiscardDocument(
        plan_id=inventory.plan_id,
        discarded=done,
        plans=list(inventory.plan_ids),
        cancelled=list(inventory.cancels),
        sandboxes=[
            {"plan_id": f.plan_id, "resource": f.resource_id, "path": str(f.path), "bytes": f.size}
            for f in inventory.sandboxes
        ],
        branches=[
            {
                "resource": b.resource_id,
                "repository": b.repository,
                "branch": b.branch,
                "merged": b.merged,
            }
            for b in inventory.branches
        ],
        checkpoints=inventory.checkpoints,
        bytes=inventory.size,
    ).dump()


@click.command()
@click.option(
    "--retention-days",
    metavar="DAYS",
    help="Keep checkpoints younger than this (default: the gc.retention_days setting, or 14).",
)
@click.option(
    "--apply/--dry-run",
    "apply_",
    default=False,
    help="Remove them, or only list what would go (the default).",
)
@format_option
@pass_cli
def gc(cli: CliContext, retention_days: str | None, apply_: bool, local_format: str | None) -> None:
    """Drop checkpoints of superseded attempts older than the retention period.

    A dry run unless --apply: lists what would go. Kept always: every checkpoint a
    correction of a current decision could roll back to, each resource's baseline, and all
    checkpoints of applied or cancelled plans (remove those with `agents plan discard`,
    which gc lists). Git checkpoints are refs in your repository: `git gc` there frees
    their space.
    """
    from cleveragents_tui.domain.documents import GcDocument
    from cleveragents_tui.engine.ops.cleanup import collect, collectable, finished_with_sandboxes
    from cleveragents_tui.engine.setup.config import gc_retention_days, retention_days_value

    days = (
        gc_retention_days(cli.store)
        if retention_days is None
        else retention_days_value(retention_days)
    )
    doomed = collectable(cli.store, days)
    freed = collect(cli.store, doomed) if apply_ and doomed else 0
    finished = finished_with_sandboxes(cli.store)
    if cli.wants_json(local_format):
        echo_json(
            GcDocument(
                retention_days=days,
                applied=apply_,
                checkpoints=[
                    {
                        "plan_id": d.plan_id,
                        "checkpoint_id": d.checkpoint.checkpoint_id,
                        "resource": d.checkpoint.resource_id,
                    }
                    for d in doomed
                ],
                bytes_freed=freed,
                finished_plans_with_sandboxes=[
                    {"plan_id": p, "bytes": size} for p, size in finished
                ],
            ).dump()
        )
        return
    plans = len({d.plan_id for d in doomed})
    what = (
        f"{len(doomed)} checkpoints of superseded attempts older than {days} days in {plans} plans"
    )
    if not doomed:
        echo(f"no checkpoints of superseded attempts older than {days} days")
    elif apply_:
        echo(f"removed {what}: {human_size(freed)} freed")
    else:
        echo(f"would remove {what}; run `agents gc --apply` to remove them")
    for plan_id, size in finished:
        echo(
            f"  finished plan {plan_id} still holds {human_size(size)}: agents plan discard {plan_id}"
        )
