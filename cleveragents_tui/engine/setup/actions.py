"""Finding and reading actions: an action file's path, or the name of a registered action."""

from __future__ import annotations

from pathlib import Path

import yaml

from cleveragents_tui.automation.preflight import parse_action
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.setup.project_init import STARTER_PROMPT
from cleveragents_tui.safe_yaml import NoAliasLoader
from cleveragents_tui.store.store import Store


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long for the filesystem, a NUL byte
        return False


def load_action(ref: str, store: Store | None = None) -> Action:
    """``ref`` is an action file (YAML) or an action registered in ``store`` (``agents action
    create``)."""
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
        raise UserError(
            f"no action file or registered action {ref!r}",
            "give the path of an action file, or a name from `agents action list` "
            "(`agents init` writes a starter action file)",
        )
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


def with_prompt(action: Action, prompt: str | None, chat: bool) -> Action:
    """``action`` with the task ``agents plan use --prompt`` gave (kept with the plan); for a
    chat plan, refused while the task is still the starter action's placeholder, which a
    model would take as the task."""
    if prompt is not None:
        task = " ".join(prompt.split())
        if not task:
            raise UserError(
                "--prompt is empty",
                'say the task in words, e.g. --prompt "Add a CONTRIBUTING.md"',
            )
        if "\x00" in task:
            raise UserError("--prompt holds a NUL character", "give the task as plain text")
        return action.model_copy(update={"prompt": task})
    if chat and " ".join(action.prompt.split()).startswith(STARTER_PROMPT):
        raise UserError(
            f"the action's prompt is still the starter's placeholder ({STARTER_PROMPT} …)",
            f'give the task: agents plan use {action.name} --prompt "…", or edit prompt: in '
            "the action file and run `agents action create FILE` again",
        )
    return action
