"""``agents automation-profile ...``: list, show, add and remove automation profiles.

JSON output (``--format=json``): ``cleveragents.automation-profile/1`` for show, add and
remove (add and remove also carry ``result``), ``cleveragents.automation-profile-list/1``
for list. Both are described in docs/automation-profiles.md.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cleveragents_tui.cli.context import (
    CliContext,
    echo,
    echo_either,
    format_option,
    output_file_options,
    pass_cli,
)
from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.errors import UserError

if TYPE_CHECKING:  # imported when a command runs, not when the CLI starts
    from cleveragents_tui.domain.profile import AutomationGuard, AutomationProfile, SafetyProfile

WIDTH = 96


def _table(rows: list[tuple[str, ...]], indent: str = "") -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip()
        for row in rows
    ]


def _cost(value: float | None) -> str:
    return "no limit" if value is None else f"{value:g} USD"


def _safety_rows(safety: SafetyProfile) -> list[tuple[str, str]]:
    categories = ", ".join(safety.allowed_skill_categories) or "all"
    return [
        ("require_sandbox", str(safety.require_sandbox).lower()),
        ("require_checkpoints", str(safety.require_checkpoints).lower()),
        ("allow_unsafe_tools", str(safety.allow_unsafe_tools).lower()),
        ("require_human_approval", str(safety.require_human_approval).lower()),
        ("allowed_skill_categories", printable(categories)),
        ("max_cost_per_plan", _cost(safety.max_cost_per_plan)),
        ("max_total_cost", _cost(safety.max_total_cost)),
        ("max_retries_per_step", str(safety.max_retries_per_step)),
    ]


def _guard_rows(guards: AutomationGuard) -> list[tuple[str, str]]:
    calls = guards.max_tool_calls_per_step
    allow = guards.tool_allowlist
    deny = guards.tool_denylist
    return [
        ("max_tool_calls_per_step", "unlimited" if calls is None else str(calls)),
        ("max_total_cost", _cost(guards.max_total_cost)),
        ("tool_allowlist", "all tools" if allow is None else printable(", ".join(allow)) or "-"),
        ("tool_denylist", "none" if deny is None else printable(", ".join(deny)) or "-"),
        ("require_approval_for_writes", str(guards.require_approval_for_writes).lower()),
        ("require_approval_for_apply", str(guards.require_approval_for_apply).lower()),
    ]


def render_profile(profile: AutomationProfile) -> str:
    from cleveragents_tui.automation.profiles import profile_kind, profile_summary, threshold_mode

    lines = [f"{profile.name} ({profile_kind(profile)})"]
    if profile.description:
        for paragraph in printable(profile.description).splitlines():
            lines += textwrap.wrap(
                paragraph, WIDTH - 2, initial_indent="  ", subsequent_indent="  "
            )
    lines += ["", f"  {profile_summary(profile)}", ""]
    lines.append("Thresholds: automatic when confidence >= threshold (0.0 always, 1.0 never)")
    rows: list[tuple[str, ...]] = [("FLAG", "THRESHOLD", "MODE", "GATES")]
    rows += [
        (flag.value, str(value), threshold_mode(value), flag.gates)
        for flag, value in profile.thresholds().items()
    ]
    lines += _table(rows, "  ")
    lines += ["", "Safety"]
    lines += _table(list(_safety_rows(profile.safety)), "  ")
    lines += ["", "Guards"]
    if profile.guards is None:
        lines.append("  none (every tool call is allowed by the guards)")
    else:
        lines += _table(list(_guard_rows(profile.guards)), "  ")
    return "\n".join(lines)


def render_list(profiles: list[AutomationProfile]) -> str:
    from cleveragents_tui.automation.profiles import profile_kind, profile_summary

    rows: list[tuple[str, ...]] = [("NAME", "KIND", "SUMMARY")]
    rows += [(p.name, profile_kind(p), profile_summary(p)) for p in profiles]
    return "\n".join(_table(rows))


@click.group("automation-profile")
def automation_profile() -> None:
    """Automation profiles: which tasks run automatically and which wait for a person.

    \b
    Built-in: manual (default), review, supervised, cautious, trusted, auto, ci, full-auto.
    Custom profiles are namespace/name, added from a YAML file: `export NAME -o FILE`
    writes one to start from.
    """


@automation_profile.command("list")
@format_option
@pass_cli
def list_(cli: CliContext, local_format: str | None) -> None:
    """List every profile: built-ins first, then custom ones, each with a one-line summary."""
    from cleveragents_tui.automation.profiles import ProfileRegistry, profile_list_document

    profiles = ProfileRegistry(cli.store).all()
    echo_either(
        cli, local_format, lambda: profile_list_document(profiles), lambda: render_list(profiles)
    )


@automation_profile.command()
@click.argument("name")
@format_option
@pass_cli
def show(cli: CliContext, name: str, local_format: str | None) -> None:
    """Show NAME: each threshold with what it gates, the safety profile and the guards."""
    from cleveragents_tui.automation.profiles import ProfileRegistry, profile_document

    profile = ProfileRegistry(cli.store).get(name)
    echo_either(
        cli, local_format, lambda: profile_document(profile), lambda: render_profile(profile)
    )


@automation_profile.command()
@click.argument("file", required=False, metavar="[FILE]", type=click.Path(path_type=Path))
@click.option(
    "--config",
    "config",
    metavar="FILE",
    type=click.Path(path_type=Path),
    help="The profile YAML file (or give it as FILE; `export NAME -o FILE` writes one).",
)
@click.option("--replace", is_flag=True, help="Overwrite a custom profile of the same name.")
@format_option
@pass_cli
def add(
    cli: CliContext,
    file: Path | None,
    config: Path | None,
    replace: bool,
    local_format: str | None,
) -> None:
    """Register the custom profile in FILE (its name must be namespace/name).

    The file is validated first; on any error nothing is registered.
    """
    if file is not None and config is not None:
        raise UserError("two profile files given", "give one: FILE or --config FILE")
    config = config or file
    if config is None:
        raise UserError(
            "no profile file given",
            "agents automation-profile add FILE, or --config FILE (agents automation-profile "
            "export NAME -o FILE writes one to start from)",
        )
    from cleveragents_tui.automation.profiles import (
        ProfileRegistry,
        load_profile_file,
        profile_document,
        profile_summary,
    )

    profile = load_profile_file(config)
    replaced = ProfileRegistry(cli.store).add(profile, replace=replace, source=str(config))
    result = "replaced" if replaced else "added"
    echo_either(
        cli,
        local_format,
        lambda: profile_document(profile, result),
        lambda: f"{result} {profile.name}: {profile_summary(profile)}",
    )


@automation_profile.command()
@click.argument("name")
@click.option(
    "--name",
    "new_name",
    metavar="NAMESPACE/NAME",
    help="The name in the file (default: NAME, or local/NAME for a built-in).",
)
@output_file_options("Write to FILE instead of standard output.")
@pass_cli
def export(
    cli: CliContext, name: str, new_name: str | None, output: Path | None, force: bool
) -> None:
    """Write profile NAME as a file `add --config` takes, to start a custom one from it.

    \b
    Example:
      agents automation-profile export ci --name team/ci-guarded -o ci-guarded.yaml
      (edit its thresholds, safety and guards)
      agents automation-profile add --config ci-guarded.yaml
    """
    from cleveragents_tui.automation.profiles import ProfileRegistry, profile_file_text
    from cleveragents_tui.export import tree_file

    if output is not None:
        tree_file.check_output(output, force=force)
    profile = ProfileRegistry(cli.store).get(name)
    text = profile_file_text(profile, new_name or (name if "/" in name else f"local/{name}"))
    if output is None:
        echo(text.rstrip("\n"))
        return
    tree_file.write_text(output, text, force=force)
    echo(f"wrote {output}: edit it, then agents automation-profile add --config {output}")


@automation_profile.command()
@click.argument("name")
@format_option
@pass_cli
def remove(cli: CliContext, name: str, local_format: str | None) -> None:
    """Remove the custom profile NAME (built-ins cannot be removed)."""
    from cleveragents_tui.automation.profiles import ProfileRegistry, profile_document

    profile = ProfileRegistry(cli.store).remove(name)
    echo_either(
        cli,
        local_format,
        lambda: profile_document(profile, "removed"),
        lambda: f"removed {profile.name}",
    )
