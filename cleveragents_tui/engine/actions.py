"""Finding and reading action files: a path, or the name of a bundled action."""

from __future__ import annotations

from pathlib import Path

import yaml

from cleveragents_tui.automation.preflight import parse_action
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.resources import data_path

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


def load_action(ref: str) -> Action:
    """``ref`` is an action file (YAML) or the name of a bundled action."""
    path = Path(ref).expanduser()
    if not path.is_file():
        bundled = bundled_actions()
        if ref not in bundled:
            known = ", ".join(sorted(bundled)) or "none"
            raise UserError(
                f"no action file or bundled action {ref!r}", f"give a YAML path, or one of: {known}"
            )
        path = bundled[ref]
    try:
        raw = yaml.safe_load(path.read_text("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise UserError(
            f"{path}: not valid YAML ({first})", "fix the action file (docs/actions.md)"
        ) from exc
    if not isinstance(raw, dict):
        raise UserError(f"{path}: an action file is a mapping", "see docs/actions.md")
    return parse_action(raw)
