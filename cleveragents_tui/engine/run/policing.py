"""The one place where a running plan is policed: limits, budgets and safety switches.

:meth:`Policing.check` runs before every actor step, tool call and the Apply gate: it measures
the plan's usage from the store (tool calls, time, the model calls :meth:`Policing.propose`
records, retries) against the action's ``limits:`` and the profile's ``safety`` costs, and on
a breach pauses (a ``budget_pause`` approval) or terminates as ``on_exceed`` says.
:func:`safety_switches` makes the switches that force a person to act at the gates. What each
limit means: docs/guardrails.md.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from datetime import datetime
from typing import TypeVar

from cleveragents_tui.actors.base import (
    ActorState,
    FailedCall,
    Fix,
    FixesFailures,
    Proposal,
    Reasoner,
)
from cleveragents_tui.actors.reasoners.chat_reply import MendedBySetModel
from cleveragents_tui.actors.reasoners.usage import MetersUsage
from cleveragents_tui.automation.escalation import EscalationContext
from cleveragents_tui.automation.limits import (
    LimitBreach,
    PlanUsage,
    check_actor_limits,
    check_plan_limits,
)
from cleveragents_tui.domain.approval import Approval, ApprovalAnswer, ApprovalKind
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.limits import OnExceed, PlanLimits
from cleveragents_tui.domain.profile import ALWAYS_MANUAL, AutomationFlag, AutomationProfile
from cleveragents_tui.domain.timeutil import utc_now
from cleveragents_tui.domain.wording import counted as counted_things
from cleveragents_tui.engine.core.in_flight import waiting_on
from cleveragents_tui.engine.core.prices import price_of
from cleveragents_tui.engine.run.errors import ReasonerFailedError
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.usage_queries import MODEL_USAGE, UsageQueries

_Answer = TypeVar("_Answer")

PRICES = "prices."  # the breach of a model with no price, under a cost limit
WALL_CLOCK = "limits.max_wall_clock_seconds"
# Limits a tool call is counted against before it is made: what the figure counts.
_COUNTED_BEFORE = {
    "max_tool_invocations": "tool call",
    "max_tool_calls_per_invocation": "tool call",
    "max_retries_per_tool": "retry",
}

Settled = Callable[[ApprovalKind, str], bool]
"""The runner's answer look-up: True if approved; raises while pending or when denied."""


class LimitTerminated(Exception):
    """A limit with ``on_exceed: terminate`` was exceeded: the plan ends errored."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True)
class Usage:
    """A plan's usage as the store has it, at one check."""

    plan: PlanUsage
    total_cost_usd: float  # every plan's model calls (safety.max_total_cost)
    largest_call_tokens: int  # actor.max_tokens_per_call
    execute_tool_calls: int  # actor.max_tool_calls_per_invocation
    retries_of_tool: int  # actor.max_retries_per_tool, before a call of that tool
    unpriced: dict[str, int]  # model -> the plan's calls of it with no price (counted $0)


@dataclass
class ModelTally:
    """A plan's model calls added up as they are read: before each step only the calls
    recorded since are read (reading them all each time made a step cost grow with the
    plan: 0.2 s at 10,000 calls; issue 22)."""

    last_event: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    largest_call_tokens: int = 0
    unpriced: Counter[str] = dataclasses.field(default_factory=Counter)

    def add(self, calls: list[dict[str, object]], last_event: int) -> None:
        self.last_event = last_event
        for call in calls:
            tokens = _int(call, "tokens")
            self.tokens += tokens
            self.cost_usd += _float(call, "cost_usd")
            self.largest_call_tokens = max(self.largest_call_tokens, tokens)
            if call.get("priced") is False:
                self.unpriced[str(call.get("model"))] += 1


@dataclass(eq=False)
class Policing:
    """One plan's policing; the runner makes it with the gates' ``settled`` and ``scoped``."""

    store: Store
    plan_id: str
    limits: PlanLimits
    profile: AutomationProfile
    _: KW_ONLY
    settled: Settled
    scoped: Callable[[str], str]
    _tally: ModelTally = dataclasses.field(default_factory=ModelTally, init=False)
    _started: datetime | None = dataclasses.field(default=None, init=False)  # once known

    # -- usage ----------------------------------------------------------------------------

    def propose(self, reasoner: Reasoner, state: ActorState, phase: Phase) -> Proposal | None:
        """Ask the reasoner, and record what its model calls used (also when it fails). A
        reasoner that gives no decision (ReasonerError and the like) ends the run errored."""
        return self._asking(reasoner, phase, lambda: reasoner.propose(state, phase))

    def fix(self, reasoner: FixesFailures, state: ActorState, failed: FailedCall) -> Fix | None:
        """Ask the execution actor for a fix of what ``failed`` checked, as :meth:`propose`
        asks for a decision (its model calls recorded, its errors ending the run)."""
        return self._asking(reasoner, Phase.EXECUTE, lambda: reasoner.propose_fix(state, failed))

    def _asking(self, reasoner: object, phase: Phase, ask: Callable[[], _Answer]) -> _Answer:
        meters = reasoner if isinstance(reasoner, MetersUsage) else None
        try:
            if meters is None:  # no model: nothing to wait on
                return ask()
            with waiting_on(self.plan_id, f"waiting for {meters.model}"):  # the progress says it
                return ask()
        except MendedBySetModel as failed:  # the fix names this plan
            fix = failed.fix_for(self.plan_id)
            raise ReasonerFailedError(self.plan_id, f"{failed.problem}: {fix}") from failed
        except UserError as failed:
            raise ReasonerFailedError(self.plan_id, str(failed)) from failed
        finally:
            if meters is not None:
                self._record(meters, phase)

    def _record(self, reasoner: MetersUsage, phase: Phase) -> None:
        calls = reasoner.take_usage()
        if not calls:
            return
        with self.store.unit_of_work(write=True) as uow:
            project = uow.plans.get(self.plan_id).project
            for call in calls:
                price = price_of(uow, call.model, project)
                uow.events.append(
                    MODEL_USAGE,
                    {
                        "model": call.model,
                        "phase": phase.value,
                        "input_tokens": call.input_tokens,
                        "output_tokens": call.output_tokens,
                        "tokens": call.tokens,
                        "cost_usd": price.of(call) if price else 0.0,
                        "priced": price is not None,
                        **({"refused": call.refused} if call.refused else {}),
                    },
                    plan_id=self.plan_id,
                )
            uow.commit()

    def usage(self, *, tool: str | None = None) -> Usage:
        """The figures now; with ``tool``, counting the call about to be made. A tool-call
        figure no limit of the action reads is not counted (0): each is a count over the
        plan's calls, before every step and call (issue 22)."""
        coming = 1 if tool is not None else 0
        limits, actor = self.limits, self.limits.actor
        with self.store.unit_of_work() as uow:
            queries = uow.usage
            mine = self._calls_so_far(queries)
            total_capped = self.profile.safety.max_total_cost is not None
            total_cost = queries.total_cost_usd() if total_capped else 0.0
            if self._started is None:  # the first change of state: it never changes
                self._started = queries.started_running(self.plan_id)
            started = self._started
            counted = limits.max_tool_invocations is not None
            tool_calls = queries.tool_calls(self.plan_id) if counted else 0
            per_invocation = tool and actor.max_tool_calls_per_invocation is not None
            execute_calls = queries.execute_tool_calls(self.plan_id) if per_invocation else 0
            retried = tool and actor.max_retries_per_tool is not None
            retries = queries.failed_calls(self.plan_id, tool) if tool and retried else 0
        return Usage(
            plan=PlanUsage(
                tokens=mine.tokens,
                cost_usd=mine.cost_usd,
                wall_clock_seconds=(utc_now() - started).total_seconds() if started else 0.0,
                tool_invocations=tool_calls + coming,
            ),
            total_cost_usd=total_cost,
            largest_call_tokens=mine.largest_call_tokens,
            execute_tool_calls=execute_calls + coming,
            retries_of_tool=retries,
            unpriced=dict(mine.unpriced),
        )

    # -- checks ---------------------------------------------------------------------------

    def check(self, *, tool: str | None = None) -> None:
        """Before a step (or the Apply gate), or before a call of ``tool``: go on, or wait
        for a budget approval (WaitForApproval), or end the plan (LimitTerminated)."""
        breach = self._breach(self.usage(tool=tool), self._raised(), tool)
        if breach is not None:
            self._breached(breach, tool)

    def _breach(
        self, usage: Usage, raised: dict[str, float], tool: str | None
    ) -> LimitBreach | None:
        limits = self.limits
        on_exceed = limits.on_exceed

        def allowed(name: str, base: float | None) -> float | None:
            return None if base is None else max(base, raised.get(name, base))

        if self._cost_caps():  # a model with no price would slip past them: ask first
            for model, calls in usage.unpriced.items():
                if f"{PRICES}{model}" not in raised:
                    return LimitBreach(f"{PRICES}{model}", 0, calls, on_exceed)

        plan = limits.model_copy(
            update={
                name: allowed(f"limits.{name}", getattr(limits, name))
                for name in (
                    "max_tokens",
                    "max_cost_usd",
                    "max_wall_clock_seconds",
                    "max_tool_invocations",
                )
            }
        )
        found = check_plan_limits(plan, usage.plan)
        if found is not None:
            return dataclasses.replace(found, limit=f"limits.{found.limit}")
        actor = limits.actor.model_copy(
            update={
                name: allowed(f"limits.actor.{name}", getattr(limits.actor, name))
                for name in type(limits.actor).model_fields
            }
        )
        found = check_actor_limits(
            actor,
            tool_calls_this_invocation=usage.execute_tool_calls if tool else 0,
            retries_of_this_tool=usage.retries_of_tool,
            tokens_this_call=usage.largest_call_tokens,
            on_exceed=on_exceed,
        )
        if found is not None:
            return dataclasses.replace(found, limit=f"limits.actor.{found.limit}")
        safety = self.profile.safety
        for name, base, used in (
            ("safety.max_cost_per_plan", safety.max_cost_per_plan, usage.plan.cost_usd),
            ("safety.max_total_cost", safety.max_total_cost, usage.total_cost_usd),
        ):
            cap = allowed(name, base)
            if cap is not None and used > cap:
                return LimitBreach(name, cap, used, on_exceed)
        return None

    def cost_usd(self) -> float:
        """What the plan's model calls cost so far (the guard's ``cost_so_far`` too)."""
        with self.store.unit_of_work() as uow:
            return self._calls_so_far(uow.usage).cost_usd

    def _calls_so_far(self, queries: UsageQueries) -> ModelTally:
        """The plan's model calls added up, with those recorded since the last look read."""
        self._tally.add(*queries.model_calls_after(self.plan_id, self._tally.last_event))
        return self._tally

    def _cost_caps(self) -> list[str]:
        """The cost limits set on this plan."""
        safety, guards = self.profile.safety, self.profile.guards
        return [
            name
            for name, value in (
                ("limits.max_cost_usd", self.limits.max_cost_usd),
                ("safety.max_cost_per_plan", safety.max_cost_per_plan),
                ("safety.max_total_cost", safety.max_total_cost),
                ("guards.max_total_cost", guards.max_total_cost if guards else None),
            )
            if value is not None
        ]

    def _says(self, breach: LimitBreach, tool: str | None) -> tuple[str, str]:
        """What went past what, and what approving does."""
        if breach.limit.startswith(PRICES):
            model = breach.limit.removeprefix(PRICES)
            return (
                f"{model} has no price, so {', '.join(self._cost_caps())} cannot count its "
                f"{counted_things(breach.used, 'call')}: set {breach.limit}.input_per_mtok and "
                ".output_per_mtok (agents config set)",
                "go on with its calls counted as $0 until it has a price",
            )
        if breach.limit == WALL_CLOCK:
            after = f"{self._configured(breach.limit):g} s after your answer"
            return breach.message, f"go on (the limit moves to {after})"
        raised = breach.used + self._configured(breach.limit)
        counted = _COUNTED_BEFORE.get(breach.limit.rpartition(".")[2])
        what = breach.message
        if tool is not None and counted is not None:  # the call is not made
            what = (
                f"{breach.limit} exceeded: {tool} would be {counted} {breach.used:g} of at "
                f"most {breach.allowed:g}, and is not made"
            )
        return what, f"go on (the limit moves to {raised:g})"

    def _budget_approvals(self) -> list[Approval]:
        with self.store.unit_of_work() as uow:
            return [
                a
                for a in uow.approvals.every(self.plan_id)
                if a.kind is ApprovalKind.BUDGET_PAUSE and "limit" in a.details
            ]

    def _raised(self) -> dict[str, float]:
        """Each limit as approvals raised it: the figure at the breach plus the limit. The
        wall clock counts from the answer: the wait for it is spent, and counting from the
        breach would let a late answer (later than the limit) only ask again."""
        raised: dict[str, float] = {}
        for approval in self._budget_approvals():
            if approval.answer is not ApprovalAnswer.APPROVED:
                continue
            name = str(approval.details["limit"])
            grant = float(approval.details["used"]) + float(approval.details["base"])
            if name == WALL_CLOCK and approval.answered_at is not None:
                grant += max(0.0, (approval.answered_at - approval.requested_at).total_seconds())
            raised[name] = max(raised.get(name, grant), grant)
        return raised

    def _breached(self, breach: LimitBreach, tool: str | None) -> None:
        figures = {
            "limit": breach.limit,
            "allowed": breach.allowed,
            "used": breach.used,
            "action": breach.action.value,
        }
        what, approving = self._says(breach, tool)
        if breach.action is OnExceed.TERMINATE:
            self._event(figures)
            raise LimitTerminated(f"{what} (on_exceed: terminate)")
        # One approval per raise of a limit, answered as any gate's: pending, it is waited
        # for; denied, it is a denial like any other; not asked yet, it is asked now.
        raises = sum(
            1
            for a in self._budget_approvals()
            if a.details["limit"] == breach.limit and a.answer is ApprovalAnswer.APPROVED
        )
        key = f"budget:{breach.limit}:{raises}"
        if self.settled(ApprovalKind.BUDGET_PAUSE, key):
            return  # pragma: no cover - an approved one has raised the limit already
        self._event(figures)
        base = self._configured(breach.limit)
        approval = Approval(
            plan_id=self.plan_id,
            kind=ApprovalKind.BUDGET_PAUSE,
            question=f"{what}. Approve to {approving}, deny to stop here.",
            details={"key": self.scoped(key), **figures, "base": base},
        )
        with self.store.unit_of_work(write=True) as uow:
            uow.approvals.add(approval)
            uow.commit()
        from cleveragents_tui.engine.run.errors import WaitForApproval

        raise WaitForApproval(approval)

    def _configured(self, limit: str) -> float:
        """The limit as the action or the profile sets it (not as approvals raised it)."""
        if limit.startswith(PRICES):
            return 0.0  # a model with no price: approving accepts the calls made so far
        section, _, name = limit.rpartition(".")
        owner: object = {
            "limits": self.limits,
            "limits.actor": self.limits.actor,
            "safety": self.profile.safety,
        }[section]
        return float(getattr(owner, name))

    def _event(self, figures: dict[str, object]) -> None:
        with self.store.unit_of_work(write=True) as uow:
            uow.events.append("limit_exceeded", figures, plan_id=self.plan_id)
            uow.commit()


def safety_switches(
    profile: AutomationProfile, flag: AutomationFlag, context: EscalationContext
) -> tuple[AutomationProfile, EscalationContext]:
    """The profile and question a gate is decided with: a switch that requires a person
    makes the flag manual (threshold 1.0) and says so in the question."""
    switch = None
    if profile.safety.require_human_approval and flag in (
        AutomationFlag.EDIT_CODE,
        AutomationFlag.EXECUTE_COMMAND,
    ):
        switch = "safety.require_human_approval"
    guards = profile.guards
    if flag is AutomationFlag.SELECT_TOOL and guards and guards.require_approval_for_apply:
        switch = "guards.require_approval_for_apply"
    if switch is None:
        return profile, context
    forced = profile.model_copy(update={flag.value: ALWAYS_MANUAL})
    question = f"{context.question} ({switch} asks a person)"
    return forced, dataclasses.replace(context, question=question)


def _int(payload: dict[str, object], key: str) -> int:
    value = payload.get(key, 0)
    return int(value) if isinstance(value, int | float) else 0


def _float(payload: dict[str, object], key: str) -> float:
    value = payload.get(key, 0.0)
    return float(value) if isinstance(value, int | float) else 0.0
