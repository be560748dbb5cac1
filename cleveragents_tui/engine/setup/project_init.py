"""``agents init``: point the app at your own repository.

Registers the git repository the current folder is in as a ``git_worktree`` resource and
writes a starter action file with comments. The action file goes to the app's data folder
(or ``--action-file``), never into the repository: ``init`` leaves your index and working
tree exactly as they were. A project without git (``--folder``) is registered as a
``filesystem`` resource instead: a plan works on a copy of the folder, and Apply writes the
files it changed back.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.setup.resource_registry import (
    DEFAULT_NAMESPACE,
    add_resource,
    repository_top,
    resource_name,
)
from cleveragents_tui.store.store import Store


@dataclass(frozen=True)
class Initialised:
    resource: Resource
    action_name: str
    action_file: Path
    kept: bool  # the action file was there already, naming the resource: left as it was


# Latin letters NFKD leaves whole (no accent to drop), spelt as they usually are in ASCII.
_UNDECOMPOSED = str.maketrans(
    {
        **{"ß": "ss", "Æ": "AE", "æ": "ae", "Ø": "O", "ø": "o", "Œ": "OE", "œ": "oe"},
        **{"Ð": "D", "ð": "d", "Þ": "Th", "þ": "th", "Ł": "L", "ł": "l", "Đ": "D", "đ": "d"},
        "ı": "i",
    }
)


def default_name(repository: Path) -> str:
    """``local/<folder>``, the folder name made a valid name part (room left for the
    action's ``-change``). Names are ASCII (ids, sandbox folder and action file names), so
    accents are dropped rather than the letters they sit on (``Été`` → ``Ete``, by NFKD;
    ``ß`` → ``ss``); what is left outside letters, digits and ``._-`` becomes ``-``."""
    decomposed = unicodedata.normalize("NFKD", repository.name).translate(_UNDECOMPOSED)
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    part = re.sub(r"[^A-Za-z0-9._-]+", "-", plain).strip("-._")[:57] or "project"
    return f"{DEFAULT_NAMESPACE}/{part}"


def actions_folder() -> Path:
    from platformdirs import user_data_path

    return user_data_path("cleveragents", appauthor=False) / "actions"


def init_project(
    store: Store,
    folder: Path,
    *,
    name: str | None = None,
    action_file: Path | None = None,
    as_folder: bool = False,
) -> Initialised:
    """Register the repository ``folder`` is in (``as_folder``: the folder itself, which is
    in none) and write the starter action; refused outside a git repository unless
    ``as_folder``, inside one with it, or when it is already registered."""
    folder = folder.expanduser().resolve()
    top = repository_top(folder)
    if as_folder and top is not None:
        raise UserError(
            f"{folder} is in a git repository ({top})",
            "leave out --folder: a repository is sandboxed as git worktrees, which copy "
            "nothing and keep your index and working tree as they are",
        )
    if top is None and not as_folder:
        raise UserError(
            f"{folder} is not in a git repository",
            "run `agents init` in your project's repository (or `git init` and commit "
            "first); for a folder without git: agents init --folder",
        )
    kind = "filesystem" if as_folder else "git"
    top = folder if top is None else top
    with store.unit_of_work() as uow:
        registered = {r.resource_id: r for r in uow.resources.registered()}
    known = next(
        (r for r in registered.values() if r.kind == kind and r.location == str(top)), None
    )
    if known is not None:
        raise UserError(
            f"{top} is already initialised as resource {known.resource_id}",
            f"see it with `agents resource show {known.resource_id}`",
        )
    resource_id = resource_name(name) if name else default_name(top)
    taken = registered.get(resource_id)
    if name is None and taken is not None:  # two folders with one name, or none in ASCII
        raise UserError(
            f"the name {resource_id} made from the folder name {top.name!r} is taken by "
            f"{taken.location}",
            "name this repository: agents init --name NAME",
        )
    default = actions_folder() / f"{resource_id.split('/')[1]}.action.yaml"
    target = (action_file or default).expanduser().resolve()
    namespace, part = resource_id.split("/")
    action_name = f"{namespace}/{part[:57]}-change"
    # init again (a folder made a repository, a resource removed): its starter stays
    kept = action_file is None and _names(target, resource_id)
    if target.exists() and not kept:
        raise UserError(
            f"the action file {target} already exists",
            "edit it and register it with `agents action create`, or pass --action-file",
        )
    resource = add_resource(store, resource_id, kind=kind, location=str(top))
    if not kept:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(starter_action(action_name, resource_id), encoding="utf-8")
    return Initialised(resource, action_name, target, kept)


def _names(action_file: Path, resource_id: str) -> bool:
    """Whether ``action_file`` is a starter written for ``resource_id`` (edited or not)."""
    try:
        text = action_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return f"project: {resource_id}\n" in text


STARTER_PROMPT = "Describe the change you want, e.g."
"""How the starter action's placeholder task begins (a chat plan refuses it)."""


def starter_action(action_name: str, resource_id: str) -> str:
    """A runnable action with comments: one strategy decision and one change, to edit."""
    return f"""\
# A starter action for {resource_id} (docs/actions.md). Edit it, then:
#   agents action create THIS_FILE      checks it (every problem, with its line) and registers it
#   agents plan use {action_name}
name: {action_name}
description: A change to {resource_id}
# The task. The chat reasoner (agents plan use ... --reasoner chat --model PROVIDER:MODEL)
# works from this prompt, or from the one `plan use --prompt "..."` gives a plan; the
# scripted reasoner follows the decision points below.
prompt: >-
  {STARTER_PROMPT} "Add a CONTRIBUTING.md that explains how to run the
  tests".
project: {resource_id}
# The resources the plan may change: `agents resource list`. Add a database or a folder with
# `agents resource add NAME --kind database|filesystem --location PATH`.
resources: [{resource_id}]
# The tools the actors may use (docs/tools.md): list-files, search-files, read-file,
# write-file, edit-file, delete-file, move, mkdir, run-command, run-tests, query-sql,
# run-sql, notify, ... (all in local/).
tools: [local/list-files, local/search-files, local/read-file, local/write-file, local/edit-file]
# Validation tools run by the plan (docs/guardrails.md), e.g. [local/run-tests].
validations: []
# Budgets: past one, the plan pauses (or terminates) and asks you (docs/guardrails.md).
limits:
  max_tool_invocations: 50
  max_wall_clock_seconds: 1800
  on_exceed: pause
# The automation profile (plan > action > project > global; `agents automation-profile
# list`): with trusted, Strategize and Execute run on their own and Apply waits for you.
automation_profile: trusted
# Decision points for the scripted reasoner, and hints for the chat reasoner.
decisions:
  - key: approach
    type: strategy_choice
    question: How should the change be made?
    alternatives:
      - option: One new file at the top of the project
        confidence: 0.8
        rationale: The smallest change that does the job.
  - key: write
    type: implementation_choice
    parent: approach
    depends_on: [approach]
    question: What does the new file say?
    alternatives:
      - option: CONTRIBUTING.md with how to run the tests
        confidence: 0.8
        tool_calls:
          - tool: local/write-file
            arguments:
              resource: {resource_id}
              path: CONTRIBUTING.md
              content: |
                # Contributing

                Run the tests before you send a change.
"""
