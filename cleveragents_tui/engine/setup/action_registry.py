"""Checking and registering action files: ``agents action validate/create/list/show``.

``check_action_file`` reports every problem of a file at once, each with the line it is on
(from the YAML node marks): YAML syntax, the schema (every field pydantic refuses), the
rules across decision points, and what the store must know — the resources, tools,
validations, actors and automation profile the action names. ``create_action`` stores the
validated definition, so ``agents plan use NAME`` runs exactly what was checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cleveragents_tui.domain.action import _KEY, Action, DecisionPoint, Loc, rule_problems
from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.tool import ToolCategory
from cleveragents_tui.safe_yaml import NoAliasLoader
from cleveragents_tui.store.action_repository import StoredAction
from cleveragents_tui.store.store import Store

FIX = "fix the action file (docs/actions.md)"


@dataclass(frozen=True)
class Problem:
    """One problem of an action file: its line (None: the file as a whole), the path to the
    field in the file (``decisions.2.alternatives.0.confidence``) and what is wrong."""

    line: int | None
    where: str
    message: str

    def describe(self, path: Path) -> str:
        at = f"{path}:{self.line}" if self.line is not None else str(path)
        return f"{at}: {self.where}: {self.message}" if self.where else f"{at}: {self.message}"


@dataclass(frozen=True)
class CheckedAction:
    path: Path
    action: Action | None  # None when any problem was found
    problems: tuple[Problem, ...]


class ActionFileError(UserError):
    """An action file with problems; the first named, the rest counted."""

    def __init__(self, checked: CheckedAction) -> None:
        self.checked = checked
        first = checked.problems[0].describe(checked.path)
        more = len(checked.problems) - 1
        fix = (
            FIX
            if not more
            else f"{more} more: see them all with `agents action validate {checked.path}`"
        )
        super().__init__(first, fix)


def _lines(node: yaml.Node | None, loc: Sequence[str | int]) -> int | None:
    """The line (1-based) of the deepest node of ``loc`` present in the file."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            child = next(
                (
                    v
                    for k, v in node.value
                    if isinstance(k, yaml.ScalarNode) and k.value == str(part)
                ),
                None,
            )
            if child is None:  # point at the key itself for a value pydantic does not allow
                child = next((k for k, _ in node.value if k.value == str(part)), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            child = node.value[part] if 0 <= part < len(node.value) else None
        if child is None:
            break
        node, line = child, child.start_mark.line + 1
    return line


def _where(loc: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in loc)


def _duplicate_keys(node: yaml.Node, loc: Loc = ()) -> Iterator[Problem]:
    """YAML keeps the last of two equal keys silently; a file that has them is refused."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            name = str(key.value)
            if name in seen:
                yield Problem(
                    key.start_mark.line + 1,
                    _where((*loc, name)),
                    f"the key is given twice (first on line {seen[name]})",
                )
            seen.setdefault(name, key.start_mark.line + 1)
            yield from _duplicate_keys(value, (*loc, name))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            yield from _duplicate_keys(item, (*loc, i))


def _parse(text: str) -> tuple[Any, yaml.Node | None, list[Problem]]:
    loader = NoAliasLoader(text)
    try:
        node = loader.get_single_node()
        data = None if node is None else loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = None if mark is None else mark.line + 1
        return None, None, [Problem(line, "", f"not valid YAML ({exc.problem or exc})")]
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        return None, None, [Problem(None, "", f"not valid YAML ({str(exc).splitlines()[0]})")]
    finally:
        loader.dispose()
    return data, node, list(_duplicate_keys(node)) if node is not None else []


def _schema_problems(
    data: Mapping[str, Any], node: yaml.Node
) -> tuple[Action | None, list[Problem]]:
    """Every field pydantic refuses; then the cross-point rules of every action (the root
    and each subaction), all of them rather than the first."""
    problems: list[Problem] = []
    action: Action | None = None
    try:
        action = Action.model_validate(data)
    except ValidationError as exc:
        errors = [
            (tuple(p for p in e["loc"] if isinstance(p, (str, int))), e) for e in exc.errors()
        ]
        for loc, error in errors:
            if error["type"] == "value_error" and _is_action(loc):
                continue  # an action's own rules: reported one by one below
            if any(len(other) > len(loc) and other[: len(loc)] == loc for other, _ in errors):
                continue  # "at least 1 item" because its only item is refused: that one says
            message = " ".join(str(error["msg"]).split()).removeprefix("Value error, ")
            problems.append(Problem(_lines(node, loc), _where(loc), message))
    for loc, raw in _actions_in(data):
        points: list[DecisionPoint | str | None] = []
        for item in raw.get("decisions") or ():
            try:
                points.append(DecisionPoint.model_validate(item))
            except ValidationError:
                key = item.get("key") if isinstance(item, dict) else None
                points.append(key if isinstance(key, str) and _KEY.match(key) else None)
        subs = [s.get("name") for s in raw.get("subactions") or () if isinstance(s, dict)]
        for rule_loc, message in rule_problems(points, [str(s) for s in subs]):
            full = (*loc, *rule_loc)
            problems.append(Problem(_lines(node, full), _where(full), message))
    return action, problems


def _is_action(loc: Sequence[str | int]) -> bool:
    """``loc`` names the root or a subaction (``subactions.0.subactions.1``)."""
    return len(loc) % 2 == 0 and all(
        (p == "subactions") if i % 2 == 0 else isinstance(p, int) for i, p in enumerate(loc)
    )


def _actions_in(data: Any, loc: Loc = ()) -> Iterator[tuple[Loc, Mapping[str, Any]]]:
    if not isinstance(data, Mapping):
        return
    decisions = data.get("decisions")
    if decisions is None or isinstance(decisions, list):
        yield loc, data
    subactions = data.get("subactions")
    for i, sub in enumerate(subactions if isinstance(subactions, list) else ()):
        yield from _actions_in(sub, (*loc, "subactions", i))


def _store_problems(store: Store, data: Mapping[str, Any], node: yaml.Node) -> list[Problem]:
    """What the store and the registries must know: each resource, tool, validation,
    actor and the automation profile the action (or a subaction) names. Read from the file
    as it is, so these are reported even when the schema refused something else."""
    from cleveragents_tui.actors.tools import default_registry
    from cleveragents_tui.automation.profiles import ProfileRegistry
    from cleveragents_tui.engine.run.plans import ACTORS

    tools = default_registry()
    with store.unit_of_work() as uow:
        resources = {r.resource_id for r in uow.resources.registered()}
    problems: list[Problem] = []
    known_tools = ", ".join(tools.names())

    def add(loc: Loc, message: str) -> None:
        problems.append(Problem(_lines(node, loc), _where(loc), message))

    def tool(loc: Loc, name: object) -> None:
        if isinstance(name, str) and tools.get(name) is None:
            add(loc, f"tool {name} is not registered: use one of {known_tools}")

    profile = data.get("automation_profile")
    if isinstance(profile, str):
        try:
            ProfileRegistry(store).get(profile)
        except UserError as exc:
            add(("automation_profile",), str(exc))
    for loc, each in _actions_in(data):
        named = [r for r in _items(each.get("resources")) if isinstance(r, str)]
        for i, name in enumerate(_items(each.get("resources"))):
            if isinstance(name, str) and name not in resources:
                add(
                    (*loc, "resources", i),
                    f"resource {name} is not registered: register it with `agents resource "
                    "add` (list them with `agents resource list`)",
                )
        actors = each.get("actors")
        for role in ("strategy", "execution"):
            actor = actors.get(role) if isinstance(actors, Mapping) else None
            if isinstance(actor, str) and actor not in ACTORS:
                known = ", ".join(sorted(ACTORS))
                add((*loc, "actors", role), f"actor {actor} is not known: use one of {known}")
        for i, name in enumerate(_items(each.get("tools"))):
            tool((*loc, "tools", i), name)
        for i, name in enumerate(_items(each.get("validations"))):
            spec = tools.get(name) if isinstance(name, str) else None
            if isinstance(name, str) and spec is None:
                add((*loc, "validations", i), f"validation {name} is not registered")
            elif spec is not None and spec.category is not ToolCategory.VALIDATION:
                add((*loc, "validations", i), f"{name} is a {spec.category} tool, not a validation")
        for i, point in enumerate(_items(each.get("decisions"))):
            alternatives = point.get("alternatives") if isinstance(point, Mapping) else None
            for j, alternative in enumerate(_items(alternatives)):
                for field in ("tool_calls", "fix"):  # a fix's calls are checked the same way
                    calls = alternative.get(field) if isinstance(alternative, Mapping) else None
                    for k, call in enumerate(_items(calls)):
                        if not isinstance(call, Mapping):
                            continue
                        where = (*loc, "decisions", i, "alternatives", j, field, k)
                        tool((*where, "tool"), call.get("tool"))
                        arguments = call.get("arguments")
                        name = call.get("tool")
                        if isinstance(name, str) and isinstance(arguments, Mapping | None):
                            wrong = tools.argument_problem(name, arguments or {})
                            if wrong is not None:
                                add((*where, "arguments"), f"{name}: {wrong}")
                        target = (
                            arguments.get("resource") if isinstance(arguments, Mapping) else None
                        )
                        if isinstance(target, str) and target not in named:
                            add(
                                (*where, "arguments", "resource"),
                                f"resource {target} is not one of the action's resources: add "
                                "it to `resources`",
                            )
    return problems


def _items(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def check_action_file(store: Store, path: Path) -> CheckedAction:
    """Every problem of the action file at ``path``; the action when there is none."""
    path = path.expanduser()
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        raise UserError(
            f"no action file {path}", "give the path of an action file (YAML)"
        ) from None
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
        raise UserError(
            f"{path}: cannot be read ({reason})", "check the path and permissions"
        ) from exc
    data, node, problems = _parse(text)
    action: Action | None = None
    if node is not None and not isinstance(data, dict):
        problems.append(
            Problem(_lines(node, ()), "", "an action file is a mapping (name: ..., prompt: ...)")
        )
    elif node is None and not problems:
        problems.append(Problem(None, "", "the file is empty"))
    elif node is not None:
        action, schema = _schema_problems(data, node)
        problems += schema + _store_problems(store, data, node)
    problems.sort(key=lambda p: p.line or 0)
    return CheckedAction(path, action if not problems else None, tuple(problems))


def create_action(
    store: Store, path: Path, *, profile: str | None = None, replace: bool = False
) -> tuple[Action, bool]:
    """Check the file and store its action; refused (nothing stored) on any problem, or when
    the name is taken and ``replace`` is not set. Returns the action and whether it is new.
    ``profile``: the action-level automation profile (``--automation-profile``)."""
    checked = check_action_file(store, path)
    if checked.action is None:
        raise ActionFileError(checked)
    action = checked.action
    if profile is not None:
        from cleveragents_tui.automation.profiles import ProfileRegistry

        action = action.model_copy(
            update={"automation_profile": ProfileRegistry(store).get(profile).name}
        )
    with store.unit_of_work(write=True) as uow:
        if uow.actions.find(action.name) is not None and not replace:
            raise UserError(
                f"action {action.name} is already registered",
                f"replace it with `agents action create {path} --replace`, or rename it in the file",
            )
        new = uow.actions.put(
            action.name, action.model_dump(mode="json"), str(path.expanduser().resolve())
        )
        uow.events.append(
            "action_registered",
            {"action": action.name, "replaced": not new},
            actor="agents action create",
        )
        uow.commit()
    return action, new


def registered_actions(store: Store) -> list[StoredAction]:
    with store.unit_of_work() as uow:
        return uow.actions.all()


def registered_action(store: Store, name: str) -> StoredAction:
    with store.unit_of_work() as uow:
        return uow.actions.get(name)


def describe_problems(checked: CheckedAction) -> list[str]:
    return [shorten(p.describe(checked.path), 400) for p in checked.problems]
