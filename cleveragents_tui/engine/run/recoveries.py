"""What the store says about a failed call's recovery decisions (engine/run/failures.py
makes them): their step keys, the calls a retry makes and how they went, a person's pick
when correcting one, and the line of a failure's output that questions quote."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cleveragents_tui.actors.base import ActorState, FailedCall, Fix, ToolCallRequest
from cleveragents_tui.domain.call_text import failure_summary
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.enums import DecisionType
from cleveragents_tui.domain.tool import ToolInvocation

RETRY = "retry"
ESCALATE = "escalate"
FAILURE_KEY = "failure"
RECOVER = "recover"  # step keys of recovery decisions: recover:<step>:<call>:retry-N / escalate
STOP_AND_ASK = "Stop and ask a person"  # a recovery decision's other option


@dataclass(frozen=True)
class Retry:
    """One retry decision: the failed call it answers, the calls it makes (a validation's
    fix, then the validation; for any other call, the calls made in its place, or the call
    again), how many of them ran, and its runs so far."""

    decision: Decision
    failed: ToolCallRequest
    calls: tuple[ToolCallRequest, ...]
    runs: tuple[ToolInvocation, ...] = ()
    replaces: bool = False  # its calls are made in the failed call's place

    @property
    def ran(self) -> int:
        return len(self.runs)

    @property
    def outcome(self) -> ToolInvocation | None:
        """How the retry went (None: not all its calls ran): the first of its calls that
        failed, else its last. A validation's fix that failed yet left the validation
        passing still passes: the validation is what the retry checks."""
        if len(self.runs) < len(self.calls):
            return None
        last = self.runs[len(self.calls) - 1]
        if not self.replaces:  # the call ran again, after any fix
            return last
        return next((r for r in self.runs[: len(self.calls)] if not r.ok), last)

    @property
    def fixed_by(self) -> tuple[ToolInvocation, ...]:
        """The runs of the calls made before the failed call ran again (all of them when
        the retry replaced it)."""
        made = self.runs[: len(self.calls)]
        return made if self.replaces else made[:-1]


@dataclass(frozen=True)
class Recoveries:
    """What the store says about one failed call: the recovery decisions so far, in order,
    and the runs of the decision that made it (the failed call's, and what came before)."""

    retries: tuple[Retry, ...]
    escalation: Decision | None
    made: tuple[ToolInvocation, ...]

    @property
    def passed(self) -> bool:
        return any(r.outcome is not None and r.outcome.ok for r in self.retries)


def is_recovery(decision: Decision) -> bool:
    """A decision the system made about a failed call: a retry, or a stop to ask a person."""
    return (decision.step_key or "").startswith(f"{RECOVER}:")


def is_retry(decision: Decision) -> bool:
    """A retry decision (``recover:STEP:N:retry-K``), made by the system for a failed call."""
    key = decision.step_key or ""
    return is_recovery(decision) and key.rpartition(":")[2].startswith(f"{RETRY}-")


def chosen_by_a_person(state: ActorState, failed: FailedCall) -> Fix | None:
    """A stop a person chose for this failure when correcting one of its retries (``plan
    correct --choose``, the app's pick: pinned in the guidance the actor was forked with);
    the latest pick decides. None: the actor is asked as usual."""
    prefix = f"{RECOVER}:{failed.step_key}:{failed.number}:"
    picks = [
        entry
        for entry in state.get("guidance", [])
        if isinstance(entry, dict)
        and str(entry.get("key", "")).startswith(prefix)
        and "choose" in entry
    ]
    if not picks or picks[-1]["choose"] != STOP_AND_ASK:
        return None
    return Fix((), f"a person chose it, correcting the retry: {picks[-1].get('text', '')}", True)


def failure_key(decision_id: str, number: int) -> str:
    """The approval key of the escalation of call ``number`` of a decision."""
    return f"{FAILURE_KEY}:{decision_id}:{number}"


def ran_line(run: ToolInvocation, width: int) -> str:
    """A call as its actor is told it: the tool, its arguments (cut to ``width``) and how it
    went."""
    arguments = shorten(json.dumps(run.arguments, separators=(",", ":"), ensure_ascii=False), width)
    how = "ok" if run.ok else "failed"
    return f"{run.tool} {arguments}: {how}: {failure_summary(run.output or '')}"


def stored_context(body: str | None) -> dict[str, Any]:
    return json.loads(body) if body else {}


def planned_calls(stored: dict[str, Any]) -> tuple[ToolCallRequest, ...]:
    """The calls a retry decision's stored context says it makes (none before fixes)."""
    return tuple(ToolCallRequest(c["tool"], c["arguments"]) for c in stored.get("tool_calls", ()))


def key_base(decision: Decision, number: int) -> str:
    return f"{RECOVER}:{decision.step_key or decision.decision_id}:{number}"


def decision_type_of(validation: bool) -> DecisionType:
    return DecisionType.VALIDATION_RESPONSE if validation else DecisionType.ERROR_RECOVERY
