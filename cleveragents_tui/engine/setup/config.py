"""``agents config``: settings at global and project scope, validated before they are stored."""

from __future__ import annotations

from dataclasses import dataclass

from cleveragents_tui.automation.precedence import GLOBAL_SCOPE, PROFILE_KEY, project_scope
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.core import reasoner_choice as chat
from cleveragents_tui.engine.core.prices import EXAMPLE as PRICE_EXAMPLE
from cleveragents_tui.engine.core.prices import is_price_key, price_value
from cleveragents_tui.engine.setup.resource_registry import SANDBOX_SETTINGS, sandbox_default_text
from cleveragents_tui.store.store import Store

GC_RETENTION_KEY = "gc.retention_days"
GC_RETENTION_DEFAULT = 14
THEME_KEY = "tui.theme"
THEMES = ("dark", "light")

KNOWN_SETTINGS: dict[str, str] = {
    PROFILE_KEY: "automation profile of new plans (precedence: plan > action > project > global)",
    chat.REASONER_KEY: "reasoner of new plans: scripted (default) or chat",
    chat.MODEL_KEY: "chat model of new plans, PROVIDER:MODEL (e.g. openai:gpt-4o-mini)",
    chat.BASE_URL_KEY: "base URL of the chat model's server (default: e.g. OPENAI_BASE_URL)",
    chat.TIMEOUT_KEY: "seconds each request to the chat model may take (default: the provider's)",
    THEME_KEY: "the app's theme: dark (default) or light; `t` in the app sets it too",
    GC_RETENTION_KEY: f"days `agents gc` keeps checkpoints of superseded attempts (default {GC_RETENTION_DEFAULT})",
    **SANDBOX_SETTINGS,
}


@dataclass(frozen=True)
class Setting:
    scope: str
    key: str
    value: object


def _scope(project: str | None) -> str:
    if project is None:
        return GLOBAL_SCOPE
    if not project.strip() or "\x00" in project:
        raise UserError(f"project name {project!r} is not valid", "give the project's name")
    return project_scope(project)


def _check_model(value: str) -> str:
    model = chat.parse_model(value)
    chat.check_installed(model)  # the key is checked when a plan uses it
    return model


_CHAT_CHECKS = {
    chat.REASONER_KEY: chat.check_reasoner,
    chat.MODEL_KEY: _check_model,
    chat.BASE_URL_KEY: chat.check_base_url,
    chat.TIMEOUT_KEY: chat.check_timeout,
}


def _check_key(key: str) -> None:
    if key not in KNOWN_SETTINGS and not is_price_key(key):
        raise UserError(
            f"unknown setting {key!r}",
            f"known settings: {', '.join(sorted(KNOWN_SETTINGS))}, {PRICE_EXAMPLE} (prices)",
        )


def set_setting(store: Store, key: str, value: str, project: str | None = None) -> Setting:
    _check_key(key)
    scope = _scope(project)
    if key == PROFILE_KEY:
        # imported here: YAML and the profile models are not needed to read a setting (each
        # browser tab reads the theme at start)
        from cleveragents_tui.automation.profiles import ProfileRegistry

        value = ProfileRegistry(store).get(value).name
    if is_price_key(key):
        value = str(price_value(key, value))
    value = _CHAT_CHECKS.get(key, str)(value)
    if key == GC_RETENTION_KEY:
        value = str(retention_days_value(value))
    if key == THEME_KEY:
        value = theme_value(value)
    if key in SANDBOX_SETTINGS:
        value = sandbox_default_text(key, value, scope)
    with store.unit_of_work(write=True) as uow:
        uow.settings.set(scope, key, value)
        uow.events.append("setting_changed", {"scope": scope, "key": key, "value": value})
        uow.commit()
    return Setting(scope, key, value)


def get_setting(store: Store, key: str, project: str | None = None) -> Setting | None:
    _check_key(key)
    scope = _scope(project)
    with store.unit_of_work() as uow:
        value = uow.settings.get(scope, key)
    return None if value is None else Setting(scope, key, value)


def unset_setting(store: Store, key: str, project: str | None = None) -> bool:
    _check_key(key)
    with store.unit_of_work(write=True) as uow:
        removed = uow.settings.unset(_scope(project), key)
        uow.commit()
    return removed


def list_settings(store: Store) -> list[Setting]:
    """Global and project settings (a plan's kept model, scope ``plan:…``, is the plan's)."""
    with store.unit_of_work() as uow:
        return [
            Setting(scope, key, value)
            for scope, key, value in uow.settings.all()
            if not scope.startswith("plan:")
        ]


def retention_days_value(text: str) -> int:
    """``gc.retention_days`` (or ``agents gc --retention-days``) as a whole number of days."""
    try:
        days = int(text)
    except ValueError:
        days = -1
    if days < 0:
        raise UserError(
            f"retention of {text!r} days is not a whole number of days",
            "give 0 or more, e.g. 14",
        )
    return days


def gc_retention_days(store: Store) -> int:
    """The global ``gc.retention_days``, or its default."""
    setting = get_setting(store, GC_RETENTION_KEY)
    return GC_RETENTION_DEFAULT if setting is None else int(str(setting.value))


def theme_value(text: str) -> str:
    """``tui.theme`` (or ``agents tui --theme``): dark or light."""
    if text not in THEMES:
        raise UserError(f"theme {text!r} is not known", f"use one of: {', '.join(THEMES)}")
    return text


def app_theme(store: Store) -> str:
    """The global ``tui.theme``, or dark."""
    setting = get_setting(store, THEME_KEY)
    return THEMES[0] if setting is None else str(setting.value)
