"""Finding and reading action files: a path, or the name of a bundled action."""

from __future__ import annotations

from pathlib import Path

import yaml

from cleveragents_tui.automation.preflight import parse_action
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.resources import data_path
from cleveragents_tui.safe_yaml import NoAliasLoader
from cleveragents_tui.store.store import Store

BUNDLED = ("assets", "actions")


def bundled_actions() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(data_path(*BUNDLED).glob("*.yaml")):
        try:
            name = yaml.safe_load(path.read_text("utf-8")).get("name")
        except (yaml.YAMLError, AttributeError, OSError):
            continue
        if isinstance(name, str):
            found[name] = path
    return found


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long for the filesystem, a NUL byte
        return False


def load_action(ref: str, store: Store | None = None) -> Action:
    """``ref`` is an action file (YAML), an action registered in ``store`` (``agents action
    create``) or the name of a bundled action."""
    try:
        path = Path(ref).expanduser()
    except RuntimeError:  # ~user of a user that does not exist
        path = Path(ref)
    if not _is_file(path):
        if store is not None:
            with store.unit_of_work() as uow:
                registered = uow.actions.find(ref)
            if registered is not None:
                return parse_action(registered.definition)
        bundled = bundled_actions()
        if ref not in bundled:
            known = ", ".join(sorted(bundled)) or "none"
            raise UserError(
                f"no action file, registered action or bundled action {ref!r}",
                f"give a YAML path, a name from `agents action list`, or one of: {known}",
            )
        path = bundled[ref]
    try:
        raw = yaml.load(path.read_text("utf-8"), Loader=NoAliasLoader)  # noqa: S506 - a SafeLoader
    except OSError as exc:
        raise UserError(
            f"{path}: cannot be read ({exc.strerror or exc})", "check the path and permissions"
        ) from exc
    except (yaml.YAMLError, ValueError) as exc:  # ValueError: not UTF-8, an int too long
        first = str(exc).strip().splitlines()[0]
        raise UserError(
            f"{path}: not valid YAML ({first})", "fix the action file (docs/actions.md)"
        ) from exc
    except RecursionError:
        raise UserError(
            f"{path}: nested too deeply to read", "fix the action file (docs/actions.md)"
        ) from None
    if not isinstance(raw, dict):
        raise UserError(f"{path}: an action file is a mapping", "see docs/actions.md")
    return parse_action(raw)
