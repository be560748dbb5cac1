"""What `plan use/run/resume/apply` say about how a run ended, and their exit codes.

A script must not take a plan that was not applied for one that was:

- exit 0: the plan applied (each landed resource is named: for a git repository the
  branch and ``git merge`` it takes), or it stopped for a person (an approval, a pause);
- exit 1: the run **errored** (an Apply that failed, or a run ended by an error such as a
  limit that terminates it); the reason in one line on stderr;
- exit 2: what was asked is wrong (a usage error, the plan's state does not allow it);
- exit 3: Apply was **refused** (constrained: a real resource changed meanwhile, a
  conflict); the reason in one line on stderr; nothing was landed from that resource.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cleveragents_tui.cli import json_output
from cleveragents_tui.cli.context import echo, echo_json
from cleveragents_tui.cli.render import plan_heading, usage_line
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.wording import as_option
from cleveragents_tui.views.lines import one_line

if TYPE_CHECKING:  # imported when a command runs, not when the CLI starts
    from cleveragents_tui.domain.plan import Plan
    from cleveragents_tui.engine.run.denial import Denial
    from cleveragents_tui.store.store import Store

ERRORED_EXIT = 1
CONSTRAINED_EXIT = 3


class NotApplied(UserError):
    """The run ended constrained (exit 3) or errored (exit 1); the CLI prints it in one line."""

    def __init__(self, problem: str, fix: str, exit_code: int) -> None:
        super().__init__(problem, fix)
        self.exit_code = exit_code


def finished(store: Store, plan_ref: str, run: Callable[[], Plan]) -> Plan:
    """Run ``run`` (a resume or an Apply of ``plan_ref``) and refuse, with its exit code, an
    end that is neither applied nor waiting for a person: constrained, or errored."""
    try:
        result = run()
    except UserError:
        raise
    except Exception as exc:  # the Apply failed: the plan ended errored, with the reason
        with store.unit_of_work() as uow:
            plan = uow.plans.get(uow.plans.resolve(plan_ref))
        refuse_unapplied(store, plan, str(exc))
        raise
    refuse_unapplied(store, result)
    return result


def refuse_unapplied(store: Store, result: Plan, cause: str | None = None) -> None:
    """Raise NotApplied for a plan that ended constrained in Apply, or errored."""
    if result.state is PlanState.CONSTRAINED and result.phase is Phase.APPLY:
        reason, fix = _latest(store, result.plan_id, "apply_failed")
        raise NotApplied(
            f"plan {result.plan_id} was not applied (constrained): "
            f"{reason or 'a resource refused it'}",
            # The refusing resource's own fix; an Apply refused by an older version recorded
            # none (its reason holds it), nor does a refusal raised without one.
            fix
            or f"put the real resource right, then retry with agents plan run {result.plan_id}, "
            f"or correct a decision (agents plan correct)",
            CONSTRAINED_EXIT,
        )
    if result.state is PlanState.ERRORED:
        kind = "apply_failed" if result.phase is Phase.APPLY else "plan_errored"
        reason = _latest(store, result.plan_id, kind)[0] or cause or "see agents plan show"
        raise NotApplied(
            f"plan {result.plan_id} was not applied (errored): {reason}",
            _terminated_fix(store, result)
            or f"once the cause is fixed, retry with agents plan run {result.plan_id}",
            ERRORED_EXIT,
        )


def _terminated_fix(store: Store, plan: Plan) -> str | None:
    """A limit with ``on_exceed: terminate`` ends every later run too (usage only grows, and
    the plan keeps its action's limits): running it again is no fix."""
    if plan.phase is Phase.APPLY:
        return None
    with store.unit_of_work() as uow:
        breaches = uow.events.payloads(plan.plan_id, "limit_exceeded")
    ended = [b for b in breaches if b.get("action") == "terminate"]
    if not ended:
        return None
    return (
        f"the plan keeps its action's limits: raise {ended[-1].get('limit')} in the action and "
        f"start a new plan (agents plan use), or cancel this one: agents plan cancel "
        f"{plan.plan_id}"
    )


def report_plan(
    store: Store, result: Plan, *, as_json: bool | None = None, who: str | None = None
) -> None:
    """Where a run left the plan: its heading, what landed, what it waits for and how to
    answer (or the JSON document under --format=json; ``as_json``: the command's own). The
    commands it suggests to answer or apply repeat ``who``, the command's ``--as NAME``."""
    from cleveragents_tui.engine.read.browse import plan_usage
    from cleveragents_tui.engine.run.constrained_apply import reverted_into

    if json_output.wanted() if as_json is None else as_json:  # the global --format=json
        echo_json(json_output.plan_result(store, result))
        return
    echo(plan_heading(result))
    if (usage := plan_usage(store, result.plan_id)).model_calls:  # what a model run cost
        echo(f"  used so far: {usage_line(usage)}")
    if (reverted := reverted_into(store, result)) is not None:  # engine/run/constrained_apply.py
        echo(
            f"  not applied: {reverted.guidance}; reverted to Strategize by {reverted.correction_id}"
        )
    for line in next_steps(store, result, who):
        echo(f"  {line}")


def next_steps(store: Store, result: Plan, who: str | None = None) -> list[str]:
    """What the plan waits for, each question with the command that answers it, and what
    comes next (a run, its parent's run, or the Apply); for an applied plan where it landed
    and how to take it; none for a cancelled plan."""
    if result.state is PlanState.APPLIED:
        return _landed(store, result)
    from cleveragents_tui.engine import pending_approvals
    from cleveragents_tui.engine.run.approvals import goes_on_with_a_run
    from cleveragents_tui.engine.run.children import landing_parent

    pending = pending_approvals(store, result.plan_id, family=True)
    lines: list[str] = []
    named = as_option(who)
    for approval in pending:
        approve = f"agents approval approve {approval.approval_id}{named}"
        whose = "" if approval.plan_id == result.plan_id else f"child plan {approval.plan_id}: "
        lines.append(f"waiting for: {whose}{approval.question}  ({approve})")
    plan_id = result.plan_id
    if result.state is PlanState.PAUSED:  # `plan apply` refuses it until it runs on
        lines.append(f"paused: go on with agents plan run {plan_id}")
    elif goes_on_with_a_run(store, result, len(pending)):
        lines.append(f"nothing left to answer: go on with agents plan run {plan_id}")
    elif (lands_with := landing_parent(store, result)) is not None:
        lines.append(f"lands with its parent plan: go on with agents plan run {lands_with}")
    elif any(a.kind.value == "apply_gate" for a in pending):
        lines.append(f"what Apply lands: agents plan apply {plan_id} --dry-run{named}")
        land = f"agents plan apply {plan_id}{named}"
        lines.append(f"review it: agents plan tree {plan_id}; land it: {land}")
    return lines


def report_children(store: Store, result: Plan) -> None:
    """A line for each child plan under the plan (a pause or cancel reaches them), with the
    state it is in now; nothing under --format=json, whose plan list has them."""
    from cleveragents_tui.engine.read.browse import descendants

    if json_output.wanted():
        return
    for child in descendants(store, result.plan_id):
        echo(f"  child plan {child.plan_id} ({child.action}): {child.state.value}")


def _landed(store: Store, result: Plan) -> list[str]:
    """An applied plan: where each resource's changes landed (a git repository's branch,
    with the ``git merge`` that takes it), and what it keeps until discarded (git worktrees
    and apply branches only when it landed in a repository)."""
    with store.unit_of_work() as uow:
        applied = uow.events.payloads(result.plan_id, "plan_applied")
        discarded = uow.events.payloads(result.plan_id, "plan_discarded")
        found = applied[-1].get("results", []) if applied else []
        results = [str(line) for line in found] if isinstance(found, list) else []
        known = {r.resource_id: r.kind for r in uow.resources.all()}
    # each result line starts with its resource's id (engine/run/apply.py)
    git = any(known.get(line.split(": ", 1)[0]) == "git" for line in results)
    if discarded:  # its apply branches went too: no merge to suggest
        gone = "sandboxes, git worktrees and apply branches" if git else "sandboxes"
        return [f"discarded: its {gone} were removed"]
    kept = (
        "its sandboxes and git worktrees; once you have merged, "
        f"agents plan discard {result.plan_id} removes them and its apply branches"
        if git  # a git sandbox's worktree shows in `git worktree list`: say why it stays
        else f"its sandboxes; agents plan discard {result.plan_id} removes them"
    )
    return [*(f"landed: {line}" for line in results), f"kept for corrections: {kept}"]


def _latest(store: Store, plan_id: str, kind: str) -> tuple[str | None, str | None]:
    """The latest ``kind`` event's reason and fix (None when not recorded), each one line."""
    with store.unit_of_work() as uow:
        found = uow.events.payloads(plan_id, kind)
    last = found[-1] if found else {}
    reason, fix = last.get("reason"), last.get("fix")
    return (
        " ".join(str(reason).split()) if reason else None,
        " ".join(str(fix).split()) if fix else None,
    )


def echo_choices(denial: Denial) -> None:
    """What can come after a denial, one command a line (`approval deny`, `plan show`)."""
    width = max(len(c.what) for c in denial.choices) + 2
    for choice in denial.choices:
        echo(f"  {choice.what + ':':<{width}} {choice.command}")
        if "--choose N" in choice.command:
            for number, option in enumerate(denial.alternatives, 1):
                echo(f"  {'':<{width}}   {number}. {one_line(option, 100)}")


def paused_ways_on(store: Store, plan: Plan) -> None:
    """`plan show` of a paused plan: why it is paused and each way on — a denial's choices,
    or the run that goes on after a person's pause."""
    from cleveragents_tui.engine.run.denial import paused_denial

    denial = paused_denial(store, plan.plan_id)
    if denial is None:
        echo(f"paused       go on with agents plan run {plan.plan_id}")
        return
    denied = denial.approval
    why = f": {one_line(denied.reason, 200)}" if denied.reason else ""
    by = one_line(denied.answered_by or "-", 80)
    echo(f"paused       its question was denied by {by}{why}. Next:")
    echo_choices(denial)


def echo_ready_to_go_on(store: Store) -> None:
    """A line for each plan that waits with nothing left to answer (`approval list`, `plan
    list`): nothing to approve, but not done."""
    from cleveragents_tui.engine.run.approvals import ready_to_go_on

    for plan in ready_to_go_on(store):
        echo(
            f"plan {plan.plan_id} ({one_line(plan.action, 80)}) waits with nothing left to answer: "
            f"go on with agents plan run {plan.plan_id}"
        )
