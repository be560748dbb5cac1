"""The global ``--format=json`` for every command: honoured, or refused in one line.

Commands with their own ``--format`` option print their documents themselves
(``CliContext.wants_json`` falls back to the global option). The commands that act on a plan
or a setting and had only text output print the documents below instead when the global
option asks for JSON (:data:`SPEAKS_JSON`). Every other command — the interactive ones
(``tui``, ``serve``), and any new one until it says what its JSON is — refuses
``--format=json`` with exit 2 before doing anything (:func:`refuse_elsewhere`), so a script
never parses text it took for JSON.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import click

from cleveragents_tui.cli.context import CliContext
from cleveragents_tui.domain.enums import PlanState
from cleveragents_tui.domain.errors import UserError

if TYPE_CHECKING:  # imported when a command runs, not when the CLI starts
    from cleveragents_tui.domain.plan import Plan
    from cleveragents_tui.store.store import Store

# Commands without a --format option of their own that print JSON under the global one.
SPEAKS_JSON = frozenset(
    {
        "plan use",
        "plan run",
        "plan resume",
        "plan pause",
        "plan cancel",
        "plan apply",
        "approval approve",
        "approval deny",
        "config set",
        "config unset",
        "db upgrade",
        "demo-data",
    }
)


def wanted() -> bool:
    """Whether the running command was given the global ``--format=json``."""
    context = click.get_current_context(silent=True)
    found = context.find_object(CliContext) if context is not None else None
    return found is not None and found.output_format == "json"


def plan_result(store: Store, plan: Plan) -> dict[str, Any]:
    """Where a run, a pause, a cancel or an Apply left the plan, what it waits for, and —
    applied — where each resource's changes landed (as the text's ``landed:`` lines)."""
    from cleveragents_tui.domain.documents import PlanResultDocument
    from cleveragents_tui.engine import pending_approvals
    from cleveragents_tui.engine.run.constrained_apply import reverted_into
    from cleveragents_tui.export.json import plan_json

    reverted = reverted_into(store, plan)
    landed: list[str] = []
    if plan.state is PlanState.APPLIED:
        with store.unit_of_work() as uow:
            applied = uow.events.payloads(plan.plan_id, "plan_applied")
        results = applied[-1].get("results", []) if applied else []
        landed = [str(line) for line in results] if isinstance(results, list) else []
    return PlanResultDocument(
        plan=plan_json(plan),
        pending_approvals=[
            a.model_dump(mode="json") for a in pending_approvals(store, plan.plan_id, family=True)
        ],
        landed=landed,
        reverted_by=None if reverted is None else reverted.correction_id,
    ).dump()


def leaf_commands(
    command: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    """Every command under ``command`` (itself when it has none), named as typed (``plan
    use``), in name order; a lazily loaded group (cli/__init__.py) loads each on the way."""
    if not isinstance(command, click.Group):
        yield " ".join(path), command
        return
    context = click.Context(command)
    for name in command.list_commands(context):
        sub = command.get_command(context, name)
        if sub is not None:
            yield from leaf_commands(sub, (*path, name))


def has_own_format(command: click.Command) -> bool:
    return any(p.name == "local_format" for p in command.params)


def refuse_elsewhere(group: click.Command, path: tuple[str, ...] = ()) -> None:
    """Make every command under ``group`` (named ``path``) that neither has a --format option
    nor is in :data:`SPEAKS_JSON` refuse the global ``--format=json`` (exit 2, nothing done);
    give those in it a ``--format`` after their name too, as the others have."""
    for name, command in leaf_commands(group, path):
        if name in SPEAKS_JSON:
            _take_format_after_the_name(command)
        elif not has_own_format(command) and command.callback is not None:
            command.callback = _refusing(name, command.callback)


def _take_format_after_the_name(command: click.Command) -> None:
    """``agents plan use X --format=json`` as ``agents --format=json plan use X``: the
    option sets the global one, which the command's output reads (:func:`wanted`)."""
    if any("--format" in getattr(p, "opts", ()) for p in command.params):
        return  # its own (`plan apply`), or given already

    def take(context: click.Context, _: click.Parameter, value: str | None) -> None:
        found = context.find_object(CliContext)
        if value is not None and found is not None:
            found.output_format = value

    command.params.append(
        click.Option(
            ["--format"],
            type=click.Choice(["text", "json"]),
            expose_value=False,
            callback=take,
            help="Output as text (default) or as a stable JSON document (docs/json-formats.md).",
        )
    )


def _refusing(name: str, callback: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(callback)
    def refuse_then_run(*args: Any, **kwargs: Any) -> Any:
        if wanted():
            raise UserError(
                f"agents {name} has no JSON output (--format=json)",
                f"leave out --format=json for agents {name}",
            )
        return callback(*args, **kwargs)

    return refuse_then_run
