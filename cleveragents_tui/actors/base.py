"""What actors are made of: tools they call, reasoners that choose, the state they carry.

The LangGraph graphs (``graphs.py``) drive a :class:`Reasoner` one decision at a time; the
runner records each :class:`Proposal` with ``record_decision`` and runs its tool calls
through the :class:`ToolRunner` protocol, which applies guards, checkpoints and records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, runtime_checkable

from cleveragents_tui.domain.enums import DecisionType, Phase
from cleveragents_tui.domain.tool import ToolSpec
from cleveragents_tui.sandbox.base import Sandbox


class ActorState(TypedDict):
    """The LangGraph state of an actor; plain JSON values only (strict serialisation).

    ``position`` counts the decision points the reasoner has handled in this phase;
    ``guidance`` holds correction guidance, newest last, keyed by the decision key it
    targets (``"*"`` for the whole plan); ``notes`` is the actor's running history.
    """

    plan_id: str
    phase: str
    position: int
    guidance: list[dict[str, str]]
    notes: list[str]
    done: bool


@dataclass(frozen=True)
class ToolCallRequest:
    tool: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Proposal:
    """One decision the reasoner wants recorded, and what to do after it."""

    key: str
    decision_type: DecisionType
    question: str
    chosen_option: str
    alternatives: tuple[str, ...] = ()
    confidence: float | None = None
    rationale: str | None = None
    reasoning: str | None = None
    parent_key: str | None = None
    depends_on: tuple[str, ...] = ()
    tool_calls: tuple[ToolCallRequest, ...] = ()
    spawn: tuple[str, ...] = ()  # child plan actions, for subplan spawns
    # Execute: the strategy decision (key) whose constraints proved too tight, and why.
    revise_strategy: str | None = None
    guidance_used: str | None = None  # the correction guidance this choice follows, if any


class Reasoner(Protocol):
    """Chooses the next decision of a phase from the actor's state; None when the phase is done."""

    def propose(self, state: ActorState, phase: Phase) -> Proposal | None: ...


@dataclass(frozen=True)
class FailedCall:
    """A tool call that failed under the decision ``step_key``, as its actor is asked what to
    do about it (behavior.md: the ``create_file`` flag for a validation, ``modify_config``
    for any other call)."""

    step_key: str
    call: ToolCallRequest
    output: str  # the failed run's output, as the store keeps it
    # the retries before, one line per call: "retry 1: local/edit-file {...}: ok: …"
    tried: tuple[str, ...] = ()
    # the calls the decision made before the failed one (what was written), one line each
    made: tuple[str, ...] = ()
    # a validation runs again after the fix; any other call is replaced by the fix's calls
    validation: bool = True
    number: int = 0  # the failed call's place among its decision's calls


@dataclass(frozen=True)
class Fix:
    """What the actor does about a failed call: for a validation, the calls that fix the
    work before it runs again; for any other call, the calls made in its place (none: it
    runs again as it is)."""

    tool_calls: tuple[ToolCallRequest, ...]
    rationale: str | None = None
    ask: bool = False  # no fix: stop and ask a person (the actor cannot, or was told so)
    reasoning: str | None = None  # the model's own words beside its answer


@runtime_checkable
class FixesFailures(Protocol):
    """A reasoner that can fix a failed call (the chat model, or an action's scripted
    ``fix`` of a validation); without one a retry runs the call again as it is."""

    def propose_fix(self, state: ActorState, failed: FailedCall) -> Fix | None: ...


class SandboxAccess(Protocol):
    """The plan's sandboxes as tools see them (``engine.core.sandboxes.PlanSandboxes``)."""

    def get(self, resource_id: str) -> Sandbox: ...

    def note_write(self, resource_id: str) -> None: ...


@dataclass(frozen=True)
class ToolContext:
    """What a tool may touch: the plan's sandboxes, by resource id, and nothing else."""

    plan_id: str
    phase: Phase
    sandboxes: SandboxAccess


@dataclass(frozen=True)
class ToolOutcome:
    ok: bool
    output: str
    writes: tuple[str, ...] = ()  # resource ids the call changed
    tokens: int = 0
    cost_usd: float = 0.0


class Tool(Protocol):
    spec: ToolSpec

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON Schema of the tool's arguments, as a chat model is told it."""
        ...

    def run(self, context: ToolContext, arguments: Mapping[str, Any]) -> ToolOutcome: ...
