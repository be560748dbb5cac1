"""Running an actor's tool calls: guards, safety, pre-write checkpoints, the record.

Every call is gated by the profile's guard (``check_guard``, evaluation order of the
specification) and safety profile, gets a ``pre_write`` checkpoint before it writes when
the profile requires checkpoints, and is recorded as a ``tool_invocations`` row with the
tool's declared side effects under the decision that made it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cleveragents_tui import failpoints
from cleveragents_tui.actors.base import ToolCallRequest, ToolContext, ToolOutcome
from cleveragents_tui.actors.tools import ToolRegistry
from cleveragents_tui.domain.call_text import arguments_line
from cleveragents_tui.domain.decision import Decision
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.profile import AutomationProfile, GuardScope
from cleveragents_tui.domain.tool import ToolInvocation, ToolSpec
from cleveragents_tui.engine.core.checkpoints import pre_write_checkpoint
from cleveragents_tui.engine.core.in_flight import waiting_on
from cleveragents_tui.engine.core.sandboxes import PlanSandboxes

OUTPUT_KEPT = 4000
QUESTION_CHARS = 160  # of a blocked call's arguments, first in its question


class ToolCallBlocked(Exception):
    """A guard sent the call to a human; ``reason`` says why. ``key`` names this one call
    (an approval lets it, not every later call of the tool, go on); ``question`` is what the
    person is asked, the call's arguments included: the command, not only the tool."""

    def __init__(self, tool: str, reason: str, key: str, arguments: Mapping[str, Any]) -> None:
        self.tool = tool
        self.reason = reason
        self.key = key
        self.question = f"Allow {tool} ({arguments_line(arguments, QUESTION_CHARS)})? {reason}"
        super().__init__(f"{tool}: {reason}")


def call_key(decision_id: str, number: int, tool: str) -> str:
    """A guard's approval key for call ``number`` of a decision (a step's, or a retry's): the
    same when a resumed step comes back to the call, another for any other call."""
    return f"call:{decision_id}:{number}:{tool}"


@dataclass(kw_only=True, eq=False)
class ToolExecutor:
    """Runs one plan's tool calls. ``approved`` says whether a person already approved a
    call the guard escalated (so a resumed step does not ask again)."""

    plan_id: str
    phase: Phase
    profile: AutomationProfile
    registry: ToolRegistry
    sandboxes: PlanSandboxes
    scope: GuardScope
    approved: Callable[[str], bool]
    before_call: Callable[[str], None] | None = None
    spent: Callable[[], float] | None = None  # the plan's model calls so far (run/policing.py)
    calls: int = field(default=0, init=False)
    cost_usd: float = field(default=0.0, init=False)
    tokens: int = field(default=0, init=False)
    # resources no call wrote since this executor took their latest pre_write checkpoint (a
    # failed edit that changed nothing leaves nothing to restore before its retry)
    unchanged: set[str] = field(default_factory=set, init=False)

    def run(
        self, decision: Decision, request: ToolCallRequest, calls_this_step: int
    ) -> ToolOutcome:
        if self.before_call is not None:  # the plan's limits (engine/run/policing.py)
            self.before_call(request.tool)
        tool = self.registry.tool(request.tool)
        spec = tool.spec
        if spec.unsafe and not self.profile.safety.allow_unsafe_tools:
            outcome = ToolOutcome(
                False,
                f"refused: {spec.name} is unsafe and profile {self.profile.name} blocks unsafe tools",
            )
            self._record(decision, spec, request, outcome)
            return outcome
        cost = self.cost_usd + (self.spent() if self.spent is not None else 0.0)
        guard = self.profile.check_guard(spec.name, spec.writes, cost, calls_this_step, self.scope)
        key = call_key(decision.decision_id, calls_this_step, spec.name)
        if not guard.allowed and not self.approved(key):
            reason = guard.reason or "the automation guard asks for approval"
            raise ToolCallBlocked(spec.name, reason, key, request.arguments)
        resource = request.arguments.get("resource")
        if spec.writes and self.profile.safety.require_checkpoints and isinstance(resource, str):
            with contextlib.suppress(UserError):  # an unknown resource is the tool's to report
                if pre_write_checkpoint(self.sandboxes, resource) is not None:
                    self.unchanged.add(resource)
        context = ToolContext(plan_id=self.plan_id, phase=self.phase, sandboxes=self.sandboxes)
        with waiting_on(self.plan_id, f"running {spec.name}"):  # the progress says it
            outcome = tool.run(context, dict(request.arguments))
        self.unchanged.difference_update(outcome.writes)
        self.calls += 1
        self.cost_usd += outcome.cost_usd
        self.tokens += outcome.tokens
        self._record(decision, spec, request, outcome)
        return outcome

    def _record(
        self, decision: Decision, spec: ToolSpec, request: ToolCallRequest, outcome: ToolOutcome
    ) -> None:
        invocation = ToolInvocation(
            plan_id=self.plan_id,
            decision_id=decision.decision_id,
            tool=spec.name,
            arguments=dict(request.arguments),
            side_effects=spec.side_effects,
            irreversible=spec.irreversible,
            ok=outcome.ok,
            output=outcome.output.replace("\x00", "")[:OUTPUT_KEPT],
        )
        with self.sandboxes.store.unit_of_work(write=True) as uow:
            uow.tool_invocations.add(invocation)
            uow.commit()
        failpoints.hit("tool.recorded", spec.name)  # a crash here: the call ran, the next not
