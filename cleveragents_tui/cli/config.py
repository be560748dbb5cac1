"""``agents config``: settings at global and project scope."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from cleveragents_tui.cli import json_output
from cleveragents_tui.cli.context import (
    CliContext,
    Listing,
    echo,
    echo_json,
    format_option,
    list_command,
    pass_cli,
)

if TYPE_CHECKING:  # imported when a command runs, not when the CLI starts
    from cleveragents_tui.engine.setup import config as settings

project_option = click.option(
    "--project", metavar="PROJECT", help="Project scope (default: global)."
)
resource_option = click.option(
    "--resource",
    metavar="RESOURCE",
    help="One resource's own value (sandbox.checkpoint.* only; default: global).",
)


@click.group()
def config() -> None:
    """Read and change settings.

    \b
    Settings:
      core.automation-profile  automation profile of new plans
                               (precedence: plan > action > project > global)
      core.reasoner            reasoner of new plans: scripted (default) or chat
      core.model               chat model of new plans, PROVIDER:MODEL
                               (e.g. openai:gpt-4o-mini; docs/reasoners.md)
      core.model-base-url      the chat model's server (default: OPENAI_BASE_URL)
      core.model-timeout       seconds each request to the chat model may take
                               (default: the provider's; OpenAI's is 600)
      tui.theme                the app's theme: dark (default) or light
      gc.retention_days        days `agents gc` keeps superseded attempts' checkpoints
                               (default 14)
      sandbox.checkpoint.enabled
                               checkpoint every Execute decision: true (default) or false
      sandbox.checkpoint.max-per-plan
                               checkpoints a resource keeps per plan (default 50)
                               (both: globally for resources added later, or --resource R)
      prices.PROVIDER:MODEL.input_per_mtok, prices.PROVIDER:MODEL.output_per_mtok
                               US dollars per million tokens of a model, e.g.
                               prices.openai:gpt-4o-mini.input_per_mtok 0.15
                               (docs/guardrails.md: tokens, cost and the price table)
    """


@config.command("set")
@click.argument("key")
@click.argument("value")
@project_option
@resource_option
@pass_cli
def set_(cli: CliContext, key: str, value: str, project: str | None, resource: str | None) -> None:
    """Set KEY to VALUE, globally, for one project (--project) or one resource (--resource).

    Example: agents config set core.automation-profile cautious --project local/hello-cli
    """
    from cleveragents_tui.domain.documents import SettingDocument
    from cleveragents_tui.engine.setup import config as settings
    from cleveragents_tui.engine.setup import resource_registry as registry

    if resource is not None:
        scope = registry.resource_scope(key, resource, project)
        stored = registry.set_resource_setting(cli.store, resource, key, value)
        if json_output.wanted():
            echo_json(SettingDocument(key=key, scope=scope, value=str(stored).lower()).dump())
            return
        echo(f"{key} = {str(stored).lower()} ({scope})")
        return
    setting = settings.set_setting(cli.store, key, value, project)
    if json_output.wanted():
        echo_json(SettingDocument(key=setting.key, scope=setting.scope, value=setting.value).dump())
        return
    echo(f"{setting.key} = {setting.value} ({setting.scope})")


@config.command()
@click.argument("key")
@project_option
@resource_option
@format_option
@pass_cli
def get(
    cli: CliContext, key: str, project: str | None, resource: str | None, local_format: str | None
) -> None:
    """Show KEY's value at that scope (nothing set: exit 1)."""
    from cleveragents_tui.domain.documents import SettingDocument
    from cleveragents_tui.engine.setup import config as settings
    from cleveragents_tui.engine.setup import resource_registry as registry

    if resource is not None:
        scope = registry.resource_scope(key, resource, project)
        value = registry.resource_setting(cli.store, resource, key)
        text = str(value).lower()  # as the global defaults are stored: true, false, 50
        setting: settings.Setting | None = settings.Setting(scope, key, text)
    else:
        setting = settings.get_setting(cli.store, key, project)
    if cli.wants_json(local_format):
        echo_json(
            SettingDocument(
                key=key,
                scope=setting.scope if setting else None,
                value=setting.value if setting else None,
            ).dump()
        )
    elif setting is None:
        echo(f"{key} is not set", err=True)
    else:
        echo(str(setting.value))
    if setting is None:
        raise SystemExit(1)


@config.command()
@click.argument("key")
@project_option
@resource_option
@pass_cli
def unset(cli: CliContext, key: str, project: str | None, resource: str | None) -> None:
    """Remove KEY at that scope (--resource: back to the global default)."""
    from cleveragents_tui.domain.documents import SettingDocument
    from cleveragents_tui.engine.setup import config as settings
    from cleveragents_tui.engine.setup import resource_registry as registry

    if resource is not None:
        scope = registry.resource_scope(key, resource, project)
        value = registry.set_resource_setting(cli.store, resource, key, None)
        if json_output.wanted():
            echo_json(
                SettingDocument(key=key, scope=scope, value=str(value).lower(), removed=True).dump()
            )
            return
        echo(f"{key} = {str(value).lower()} ({scope}, the default)")
        return
    removed = settings.unset_setting(cli.store, key, project)
    if json_output.wanted():
        echo_json(SettingDocument(key=key, scope=None, value=None, removed=removed).dump())
        return
    echo(f"{key} unset" if removed else f"{key} was not set")


@list_command(config)
def list_(cli: CliContext) -> Listing[settings.Setting]:
    """Every setting, by scope."""
    from cleveragents_tui.domain.documents import SettingsDocument
    from cleveragents_tui.engine.setup import config as settings

    return Listing(
        settings.list_settings(cli.store),
        lambda items: SettingsDocument(
            settings=[{"scope": s.scope, "key": s.key, "value": s.value} for s in items]
        ).dump(),
        "No settings. Example: agents config set core.automation-profile cautious",
        lambda s: f"{s.scope:<30} {s.key} = {s.value}",
    )
