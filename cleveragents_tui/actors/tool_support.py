"""What every built-in tool shares: declared parameters, argument checks, refusals, limits.

A built-in tool declares its parameters once (:class:`Param`); the same declaration checks
the arguments of a call (types, required keys, unknown keys refused) and describes them as a
JSON Schema for tool-calling models (:attr:`BuiltinTool.parameters`). Bad input and refusals
come back as ``ToolOutcome(ok=False, output=<one line>)``; only unexpected errors raise.
"""

from __future__ import annotations

import codecs
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from cleveragents_tui.actors.base import ToolContext, ToolOutcome
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.errors import InvalidIdError, UserError
from cleveragents_tui.domain.ids import NAMESPACED_NAME
from cleveragents_tui.domain.tool import ToolSpec
from cleveragents_tui.sandbox.base import Sandbox

OUTPUT_LIMIT: Final = 64 * 1024  # bytes of text a tool returns at most


class ParamType(StrEnum):
    TEXT = "text"  # a string
    BOOL = "bool"
    NUMBER = "number"  # an int or float (never a bool), finite
    ARGV = "argv"  # a non-empty list of strings
    MAPPING = "mapping"  # string keys -> JSON scalars (str, int, float, bool, null)
    OBJECTS = "objects"  # a non-empty list of JSON objects (string keys); the tool checks more


_JSON_TYPES: Final[dict[ParamType, dict[str, Any]]] = {
    ParamType.TEXT: {"type": "string"},
    ParamType.BOOL: {"type": "boolean"},
    ParamType.NUMBER: {"type": "number"},
    ParamType.ARGV: {"type": "array", "items": {"type": "string"}, "minItems": 1},
    ParamType.MAPPING: {
        "type": "object",
        "additionalProperties": {"type": ["string", "number", "boolean", "null"]},
    },
    ParamType.OBJECTS: {"type": "array", "items": {"type": "object"}, "minItems": 1},
}


@dataclass(frozen=True)
class Param:
    """One argument a tool takes. ``empty_ok``: a TEXT argument may be ``""``."""

    name: str
    type: ParamType
    description: str
    required: bool = True
    empty_ok: bool = False


class BadArguments(ValueError):
    """The arguments of a call do not match the tool's parameters (one-line reason)."""


class Arguments:
    """Checked arguments; the typed getters only read what :func:`check_arguments` accepted."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def text(self, name: str) -> str:
        value = self._values[name]
        assert isinstance(value, str)
        return value

    def optional_text(self, name: str) -> str | None:
        value = self._values.get(name)
        assert value is None or isinstance(value, str)
        return value

    def flag(self, name: str) -> bool | None:
        value = self._values.get(name)
        assert value is None or isinstance(value, bool)
        return value

    def number(self, name: str, default: float) -> float:
        value = self._values.get(name, default)
        assert isinstance(value, int | float)
        return float(value)

    def argv(self, name: str) -> list[str]:
        value = self._values[name]
        assert isinstance(value, list)
        return [str(item) for item in value]

    def mapping(self, name: str) -> dict[str, Any] | None:
        value = self._values.get(name)
        assert value is None or isinstance(value, dict)
        return value

    def objects(self, name: str) -> list[dict[str, Any]] | None:
        value = self._values.get(name)
        assert value is None or isinstance(value, list)
        return value


def check_arguments(arguments: object, params: Sequence[Param]) -> Arguments:
    """The arguments of one call, checked against ``params``; raises :class:`BadArguments`."""
    if not isinstance(arguments, Mapping):
        raise BadArguments(f"arguments must be an object, not {type(arguments).__name__}")
    known = {param.name: param for param in params}
    unknown = sorted(str(key) for key in arguments if key not in known)
    if unknown:
        raise BadArguments(
            f"unknown argument {', '.join(map(repr, unknown))} (expected: {', '.join(known)})"
        )
    values: dict[str, Any] = {}
    for param in params:
        if param.name not in arguments or arguments[param.name] is None:
            if param.required:
                raise BadArguments(f"argument {param.name!r} is required ({param.description})")
            continue
        values[param.name] = _check_value(param, arguments[param.name])
    return Arguments(values)


def _check_value(param: Param, value: object) -> object:
    name = param.name
    if param.type is ParamType.TEXT:
        if not isinstance(value, str):
            raise BadArguments(f"argument {name!r} must be a string, not {_kind(value)}")
        if not value and not param.empty_ok:
            raise BadArguments(f"argument {name!r} must not be empty")
        return value
    if param.type is ParamType.BOOL:
        if not isinstance(value, bool):
            raise BadArguments(f"argument {name!r} must be true or false, not {_kind(value)}")
        return value
    if param.type is ParamType.NUMBER:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadArguments(f"argument {name!r} must be a number, not {_kind(value)}")
        if not math.isfinite(value):
            raise BadArguments(f"argument {name!r} must be a finite number")
        return value
    if param.type is ParamType.ARGV:
        return _check_argv(name, value)
    if param.type is ParamType.OBJECTS:
        return _check_objects(name, value)
    return _check_mapping(name, value)


def _check_objects(name: str, value: object) -> list[dict[str, Any]]:
    if not isinstance(value, list | tuple) or not value:
        raise BadArguments(f"argument {name!r} must be a non-empty list of objects")
    for position, item in enumerate(value):
        if not isinstance(item, Mapping) or not all(isinstance(key, str) for key in item):
            raise BadArguments(f"{name}[{position}] must be an object, not {_kind(item)}")
    return [dict(item) for item in value]


def _check_argv(name: str, value: object) -> list[str]:
    if isinstance(value, str):
        raise BadArguments(
            f"argument {name!r} must be a list of strings, not a string: commands run without "
            "a shell (to use one, pass it explicitly, e.g. ['sh', '-c', '...'])"
        )
    if not isinstance(value, list | tuple) or not value:
        raise BadArguments(f"argument {name!r} must be a non-empty list of strings")
    for position, item in enumerate(value):
        if not isinstance(item, str):
            raise BadArguments(f"{name}[{position}] must be a string, not {_kind(item)}")
        if "\x00" in item:
            raise BadArguments(f"{name}[{position}] contains a NUL character")
    if not value[0]:
        raise BadArguments(f"{name}[0] (the program) must not be empty")
    return list(value)


def _check_mapping(name: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise BadArguments(f"argument {name!r} must be an object, not {_kind(value)}")
    checked: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise BadArguments(f"argument {name!r} has a key that is not a non-empty string")
        if item is not None and not isinstance(item, str | int | float | bool):
            raise BadArguments(
                f"{name}[{key!r}] must be a string, number, boolean or null, not {_kind(item)}"
            )
        checked[key] = item
    return checked


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def json_schema(params: Sequence[Param]) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments, for tool-calling models."""
    return {
        "type": "object",
        "properties": {
            param.name: {**_JSON_TYPES[param.type], "description": param.description}
            for param in params
        },
        "required": [param.name for param in params if param.required],
        "additionalProperties": False,
    }


def refused(reason: str) -> ToolOutcome:
    """A call that did nothing, with its one-line reason."""
    return ToolOutcome(ok=False, output=_one_line(reason))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def strategy_of(sandbox: Sandbox) -> str:
    return str(sandbox.resource.sandbox_strategy.value)


def truncate_text(data: bytes, total: int, limit: int = OUTPUT_LIMIT) -> tuple[str, bool]:
    """``data`` (the first bytes of ``total``) as text, cut at ``limit`` bytes.

    Returns the text and whether it is binary (a NUL byte, or not valid UTF-8). Invalid bytes
    become U+FFFD; a character cut in half by the limit is dropped rather than replaced.
    """
    shown = data[:limit]
    cut = total > len(shown)
    strict = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        strict.decode(shown, final=not cut)
        binary = b"\x00" in shown
    except UnicodeDecodeError:
        binary = True
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(shown, final=not cut)
    if cut:
        text += f"\n[truncated: showing the first {len(shown)} of {total} bytes]"
    return text, binary


class BuiltinTool(ABC):
    """A tool of this package: checks arguments and the phase, then :meth:`perform` s.

    :meth:`perform` raises :class:`UserError` (a sandbox refusing a path, a failed SQL
    statement, ...) for a call that cannot be done; that becomes ``ok=False`` too.
    """

    spec: ToolSpec
    params: tuple[Param, ...] = ()

    @property
    def parameters(self) -> dict[str, Any]:
        return json_schema(self.params)

    def run(self, context: ToolContext, arguments: Mapping[str, Any]) -> ToolOutcome:
        if self.spec.writes and context.phase == Phase.STRATEGIZE:
            return refused(
                f"Strategize is read-only: {self.spec.name} changes resources; "
                "call it during Execute"
            )
        try:
            checked = check_arguments(arguments, self.params)
        except BadArguments as exc:
            return refused(f"{self.spec.name}: {exc}")
        try:
            return self.perform(context, checked)
        except UserError as exc:
            return refused(f"{self.spec.name}: {exc}")

    @abstractmethod
    def perform(self, context: ToolContext, arguments: Arguments) -> ToolOutcome:
        """Do the call; arguments are checked and the phase allows it."""


def open_sandbox(context: ToolContext, resource_id: str) -> Sandbox:
    """The plan's sandbox of ``resource_id``; a :class:`UserError` names what is wrong."""
    if not NAMESPACED_NAME.match(resource_id):
        raise InvalidIdError(
            f"resource {resource_id!r} is not a namespace/name", "name a resource of the plan"
        )
    return context.sandboxes.get(resource_id)


def changed(context: ToolContext, resource_id: str) -> tuple[str, ...]:
    """Tell the plan that ``resource_id`` was written; the ``writes`` of the outcome."""
    context.sandboxes.note_write(resource_id)
    return (resource_id,)
