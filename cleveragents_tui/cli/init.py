"""``agents init``: register the repository you are in and write a starter action."""

from __future__ import annotations

from pathlib import Path

import click

from cleveragents_tui.cli.context import CliContext, echo, pass_cli


@click.command()
@click.option("--name", metavar="NAME", help="Resource name (default: local/<folder>).")
@click.option(
    "--action-file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Where to write the starter action (default: in the app's data folder; never "
    "inside your repository unless you say so).",
)
@click.option(
    "--folder",
    "as_folder",
    is_flag=True,
    help="A project without git: register this folder as a filesystem resource (a plan "
    "works on a copy of it; Apply writes the changed files back).",
)
@pass_cli
def init(cli: CliContext, name: str | None, action_file: Path | None, as_folder: bool) -> None:
    """Register the git repository this folder is in (sandboxed as git worktrees: your
    index and working tree are never touched) and write a starter action file with
    comments. Refused outside a git repository (unless --folder) or when it is already
    registered."""
    from cleveragents_tui.engine.setup.project_init import init_project
    from cleveragents_tui.engine.setup.tracked_notes import tracked_notes

    done = init_project(
        cli.store, Path.cwd(), name=name, action_file=action_file, as_folder=as_folder
    )
    resource = done.resource
    echo(f"resource {resource.resource_id} added: {resource.kind} at {resource.location}")
    for note in tracked_notes(cli.store, resource):  # a database registered before, now in git
        echo(f"note: {note}", err=True)
    if done.kept:
        echo(f"starter action kept: {done.action_file} (it was there, for {resource.resource_id})")
    else:
        echo(f"starter action written to {done.action_file}")
    echo("next: edit it, register it, run a plan (its scripted decisions, or a model on a task)")
    echo(f"  agents action create {done.action_file}")
    echo(f"  agents plan use {done.action_name}")
    echo(f'  agents plan use {done.action_name} --model openai:gpt-4o-mini --prompt "TASK"')
