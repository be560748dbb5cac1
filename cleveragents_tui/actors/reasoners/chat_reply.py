"""The checks a chat model's ``record_decision`` call passes before it becomes a proposal
(and its ``fix_failure`` call before it becomes a fix): nothing the model says is trusted as
is; a refusal names the field and what is wrong."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from cleveragents_tui.actors.base import ActorState, Fix, Proposal, ToolCallRequest
from cleveragents_tui.actors.reasoners.chat_prompt import (
    FIX_FAILURE,
    RECORD_DECISION,
    SPAWN_TYPES,
    allowed_types,
    guidance_for,
)
from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.ids import NAMESPACED_NAME

_KEY = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")  # as ``domain.action.Key``


class ReasonerError(UserError):
    """The reasoner could not produce a valid decision (the model's reply was refused)."""


class InvalidReplyError(ReasonerError):
    """The model's call was read but refused (a field, a tool, a type of another phase):
    the model is told why and asked again, a few times, before the run stops on it.
    ``detail``: what was wrong without the framing (``record_decision.confidence 1.5 is
    outside [0, 1]``), as the progress lines say it."""

    def __init__(self, problem: str, fix: str, detail: str | None = None) -> None:
        super().__init__(problem, fix)
        self.detail = detail or problem


class MendedBySetModel(ReasonerError):
    """A failure `agents plan set-model PLAN ARGS` mends: the runner, which knows the plan,
    names that command in the fix."""

    FIX: ClassVar[str]
    ARGS: ClassVar[str]

    @classmethod
    def fix_for(cls, plan: str) -> str:
        return f"{cls.FIX}: agents plan set-model {plan} {cls.ARGS}"


class ModelTimedOutError(ReasonerError):
    """The model's server took the request but gave no answer in the time one may take
    (``core.model-timeout``, else the provider's; its client tries again first): the model
    is slow or overloaded, not gone, so running the plan again may do."""

    FIX = "give it longer: agents config set core.model-timeout SECONDS"


class ModelUnreachableError(MendedBySetModel):
    """Nothing answered at the model's server (refused, unreachable; a timeout is
    :class:`ModelTimedOutError`): the server is down, or it moved and the plan still asks
    the address it started with."""

    FIX = "start the model's server, or point the plan at the one that runs"
    ARGS = "--base-url URL"


class ModelNotServedError(MendedBySetModel):
    """The server answered 404: it serves no model of that name (a typo, a model retired,
    or a local server that loaded another)."""

    FIX = "use a model the server has"
    ARGS = "PROVIDER:MODEL"


class ModelWithoutToolsError(MendedBySetModel):
    """The model answered twice in words, not with a tool call: it cannot be made to call
    one (the provider ignores ``tool_choice``, or the model has no tool calling)."""

    FIX = "use a model that calls tools"
    ARGS = "PROVIDER:MODEL"


def check_decision(
    args: Mapping[str, Any],
    state: ActorState,
    phase: Phase,
    used: tuple[str, ...],
    reasoning: str | None,
    tools: Sequence[str],
    *,
    resources: Sequence[str],
) -> Proposal:
    """The proposal ``record_decision``'s arguments make, every field checked (else one
    :class:`ReasonerError` naming the field): ``used`` are the keys taken, ``tools`` the tools
    the phase allows, ``resources`` those a call may name (the plan's)."""
    unknown = sorted(str(k) for k in args if k not in _FIELDS)
    if unknown:
        raise field_error(unknown[0], f"is not a field of {RECORD_DECISION}")

    key = _text(args, "key")
    if not _KEY.match(key):
        raise field_error(
            "key", f"{key!r} is not a decision key (lower-case letters, digits, '-', '_')"
        )
    if key in used:
        raise field_error("key", f"{key!r} is already used by an earlier decision")

    raw_type = args.get("decision_type")
    allowed = allowed_types(phase)
    try:
        decision_type = DecisionType(str(raw_type))
    except ValueError:
        raise field_error("decision_type", f"{raw_type!r} is not a decision type") from None
    if decision_type not in allowed:
        raise field_error(
            "decision_type",
            f"{decision_type.value} is not allowed in the {phase.value} phase "
            f"(allowed: {', '.join(t.value for t in allowed)})",
        )

    question = _text(args, "question")
    chosen = _text(args, "chosen_option")
    alternatives = _text_list(args, "alternatives")
    confidence = _confidence(args.get("confidence"))
    rationale = _optional_text(args, "rationale")

    parent_key = args.get("parent_key")
    if parent_key is not None:
        parent_key = _reference(parent_key, "parent_key", key, used)
    depends_on = tuple(
        _reference(ref, "depends_on", key, used)
        for ref in dict.fromkeys(_text_list(args, "depends_on"))
    )
    tool_calls = _tool_calls(args.get("tool_calls", []), phase, (tools, resources))
    spawn = _spawn(args.get("spawn", []), decision_type)

    return Proposal(
        key=key,
        decision_type=decision_type,
        question=question,
        chosen_option=chosen,
        alternatives=tuple(a for a in dict.fromkeys(alternatives) if a != chosen),
        confidence=confidence,
        rationale=rationale,
        reasoning=reasoning,
        parent_key=parent_key,
        depends_on=depends_on,
        tool_calls=tool_calls,
        spawn=spawn,
        guidance_used=guidance_for(state, key),
    )


def check_fix(args: Mapping[str, Any], tools: Sequence[str], *, resources: Sequence[str]) -> Fix:
    """The fix ``fix_failure``'s arguments make, checked as a decision's are."""
    unknown = sorted(str(k) for k in args if k not in ("rationale", "tool_calls", "stop_and_ask"))
    if unknown:
        raise field_error(unknown[0], f"is not a field of {FIX_FAILURE}", FIX_FAILURE)
    rationale = args.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        raise field_error("rationale", "must be a string", FIX_FAILURE)
    ask = args.get("stop_and_ask", False)
    if not isinstance(ask, bool):
        raise field_error("stop_and_ask", "must be true or false", FIX_FAILURE)
    calls = _tool_calls(args.get("tool_calls", []), Phase.EXECUTE, (tools, resources), FIX_FAILURE)
    if ask and calls:
        raise field_error("stop_and_ask", "is true, yet tool_calls are given", FIX_FAILURE)
    return Fix(calls, " ".join(rationale.split()) if rationale else None, ask)


def _tool_calls(
    value: object,
    phase: Phase,
    offered: tuple[Sequence[str], Sequence[str]],
    tool_name: str = RECORD_DECISION,
) -> tuple[ToolCallRequest, ...]:
    """The calls, each of a tool ``offered`` (tools, resources) gives, on one of its
    resources: a call on another resource could only fail, with a message about sandbox
    folders that tells the model nothing (and a name that is not ``namespace/name`` could
    not be recorded at all)."""
    allowed, resources = offered

    def error(field: str, problem: str) -> ReasonerError:
        return field_error(field, problem, tool_name)

    if value is None:
        return ()
    if not isinstance(value, list):
        raise error("tool_calls", "must be a list of {tool, arguments} objects")
    calls = []
    for index, item in enumerate(value):
        where = f"tool_calls[{index}]"
        if not isinstance(item, Mapping):
            raise error(where, "must be an object with tool and arguments")
        extra = sorted(str(k) for k in item if k not in ("tool", "arguments"))
        if extra:
            raise error(f"{where}.{extra[0]}", "is not a field of a tool call")
        tool = item.get("tool")
        if not isinstance(tool, str) or tool not in allowed:
            known = ", ".join(allowed) if allowed else "none"
            raise error(
                f"{where}.tool",
                f"{tool!r} is not a tool available in the {phase.value} phase (available: {known})",
            )
        arguments = item.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
            raise error(f"{where}.arguments", "must be a JSON object")
        try:
            json.dumps(arguments, allow_nan=False)
        except (TypeError, ValueError):
            raise error(f"{where}.arguments", "must hold JSON values only") from None
        if "resource" in arguments and arguments["resource"] not in resources:
            named = ", ".join(resources) or "none"
            raise error(
                f"{where}.arguments.resource",
                f"{arguments['resource']!r} is not a resource of this plan (its resources: {named})",
            )
        calls.append(ToolCallRequest(tool=tool, arguments=dict(arguments)))
    return tuple(calls)


_FIELDS = frozenset(
    {
        "key",
        "decision_type",
        "question",
        "chosen_option",
        "alternatives",
        "confidence",
        "rationale",
        "depends_on",
        "parent_key",
        "tool_calls",
        "spawn",
    }
)


def field_error(field: str, problem: str, tool_name: str = RECORD_DECISION) -> InvalidReplyError:
    what = "fix" if tool_name == FIX_FAILURE else "decision"
    detail = f"{tool_name}.{field} {problem}"
    return InvalidReplyError(
        f"the chat model proposed an invalid {what}: {detail}",
        f"the {what} was not recorded; run again or correct the plan with guidance",
        detail,
    )


def _optional_text(args: Mapping[str, Any], field: str) -> str | None:
    return None if args.get(field) is None else _text(args, field)


def _text(args: Mapping[str, Any], field: str) -> str:
    value = args.get(field)
    if not isinstance(value, str) or not value.strip():
        raise field_error(field, "is missing or empty (a non-empty string is required)")
    if "\x00" in value:
        raise field_error(field, "contains a NUL character")
    return value.strip()


def _text_list(args: Mapping[str, Any], field: str) -> list[str]:
    value = args.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise field_error(field, f"must be a list of strings, not {type(value).__name__}")
    items = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip() or "\x00" in item:
            raise field_error(f"{field}[{index}]", "must be a non-empty string")
        items.append(item.strip())
    return items


def _confidence(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise field_error("confidence", f"must be a number from 0 to 1, not {value!r}")
    number = float(value)
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise field_error("confidence", f"{value!r} is outside [0, 1]")
    return number


def _reference(value: object, field: str, key: str, used: Sequence[str]) -> str:
    if not isinstance(value, str) or not _KEY.match(value):
        raise field_error(field, f"{value!r} is not a decision key")
    if value == key:
        raise field_error(field, f"{value!r} refers to the decision itself")
    if value not in used:
        known = ", ".join(used) if used else "none yet"
        raise field_error(
            field, f"{value!r} is not the key of an earlier decision (known: {known})"
        )
    return value


def _spawn(value: object, decision_type: DecisionType) -> tuple[str, ...]:
    if value is None:
        value = []
    if not isinstance(value, list):
        raise field_error("spawn", "must be a list of child action names")
    names = []
    for index, item in enumerate(value):
        if not isinstance(item, str) or not NAMESPACED_NAME.match(item):
            raise field_error(f"spawn[{index}]", f"{item!r} is not an action name (namespace/name)")
        names.append(item)
    if names and decision_type not in SPAWN_TYPES:
        raise field_error("spawn", f"is only for subplan spawns, not {decision_type.value}")
    if decision_type is DecisionType.SUBPLAN_SPAWN and len(names) != 1:
        raise field_error("spawn", "must name exactly one child action for a subplan_spawn")
    if decision_type is DecisionType.SUBPLAN_PARALLEL_SPAWN and not names:
        raise field_error("spawn", "must name the child actions of a subplan_parallel_spawn")
    return tuple(names)
