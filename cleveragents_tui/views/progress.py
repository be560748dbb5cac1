"""One line for each thing a running plan or correction did: the app's replay log and the
CLI's progress lines (cli/progress.py) word them alike. Plain text; the caller escapes it
for the terminal (``domain.display.printable``)."""

from __future__ import annotations

from cleveragents_tui.domain.call_text import failure_summary
from cleveragents_tui.domain.display import shorten
from cleveragents_tui.domain.wording import counted
from cleveragents_tui.engine.core.in_flight import Wait, family_wait
from cleveragents_tui.engine.read.run_progress import CallView, EventView, Happened, Waiting
from cleveragents_tui.views.lines import readable

LINE_LIMIT = 160  # an event's payload can hold a long reason or many resources

# Each write of a tool call, and each failed call: the call's own line (``call_line``) says
# them, in the CLI's progress and the app's replay log.
SAID_BY_A_CALL = frozenset({"resource_written", "call_failed"})
# Logged for each decision the replay re-makes: the CLI's decision line says it already.
_NOT_SHOWN = frozenset({"decision_remade", *SAID_BY_A_CALL})


# An event whose line names fields of its payload, as they are.
_TEMPLATES = {
    "decision_remade": "re-made {key}: {chosen}",
    "correction_started": "correction {correction_id} started ({mode})",
    "correction_finished": "correction {correction_id} finished ({status})",
    "apply_started": "Apply started (attempt {attempt})",
    "apply_failed": "Apply {state}: {reason}",
    "plan_errored": "errored: {reason}",
    "plan_state": "now {phase} · {state}",
    "child_spawned": "child plan {child} started ({action})",
    "denied_decision_guided": "decision {key} to be made again: {text}",
    "limit_exceeded": "limit {limit} exceeded: {used} of {allowed} ({action})",
    "profile_changed": "profile changed from {from} to {to}",
    "apply_retried": "Apply retried (from {from})",
    "constrained_apply_reverted": "Apply refused: {reason}; reverted to decision {decision}",
    "restored_before_retry": "{resource} restored before decision {decision} retries",
    "call_failed": "{tool} failed in step {step} (run {run}): {output}",
    "sandbox_changed_outside": "files changed in the sandbox outside the plan: {count}",
    "checkpoints_collected": "{count} checkpoints of superseded attempts removed (agents gc)",
    "demo_data_loaded": "sample plan loaded",
}


class _Payload(dict[str, object]):
    def __missing__(self, key: str) -> object:
        return None  # an older event without the field: shown as None, never a KeyError


def _listed(value: object) -> str:
    return "; ".join(map(str, value if isinstance(value, list) else []))


def _counted(value: object, noun: str, plural: str | None = None) -> str:
    number = value if isinstance(value, int) else len(value) if isinstance(value, list) else 0
    return counted(number, noun, plural)


def event_line(event: EventView, *, by: bool = False) -> str:
    """One line for an event of a running plan or correction; ``by``: ending with who caused
    it, when anyone did (the app's status line, which a team shares)."""
    line = _what_happened(event)
    if by and event.actor and event.kind != "approval_answered":  # that line names them
        line += f" by {event.actor}"
    return line


def _what_happened(event: EventView) -> str:
    payload = _Payload(event.payload)
    kind = event.kind
    if kind in _TEMPLATES:
        return _TEMPLATES[kind].format_map(payload)
    if kind == "resources_rolled_back":
        return "rolled back: " + _listed(payload["resources"])
    if kind == "decisions_superseded":
        superseded = _counted(payload["count"], "decision")
        return f"{superseded} superseded; reasoning restored to before it"
    if kind in ("outside_changes_kept", "outside_changes_discarded"):
        listed = _listed(payload["changes"])
        return f"{kind.split('_')[-1]} the files changed outside the plan: {listed}"
    if kind in ("plan_paused", "plan_resumed", "plan_cancelled"):
        reason = payload["reason"]  # only a pause doctor or Ctrl+C recorded gives one
        if reason is None and payload["with"] is not None:  # engine/run/with_children.py
            reason = f"with plan {payload['with']}"
        return kind.removeprefix("plan_") + (f": {reason}" if reason is not None else "")
    if kind == "plan_created":
        return (
            f"plan {event.plan_id} created from {payload['action']} (profile {payload['profile']})"
        )
    if kind == "model_changed":
        to = _Payload(payload["to"] if isinstance(payload["to"], dict) else {})
        at = f" at {to['base_url']}" if to["base_url"] else ""
        return f"model changed to {to['model']}{at}"
    if kind == "plan_discarded":
        return f"discarded: {_counted(payload['sandboxes'], 'sandbox', 'sandboxes')} removed"
    if kind == "plan_paused_on_denial":  # engine/run/denial.py; a reason is optional in the app
        why = f": {payload['reason']}" if payload["reason"] else ""
        return f"paused: {payload['by']} denied its question{why}"
    if kind == "plan_applied":
        return f"applied: {_counted(payload['results'], 'resource')}"
    if kind == "approval_answered":
        return f"approval {payload['approval_id']}: {payload['answer']} by {event.actor}"
    if kind == "model_usage":
        cost = payload["cost_usd"]
        priced = f", ${cost:.4f}" if payload["priced"] and isinstance(cost, float) else ""
        said = f"model {payload['model']}: {payload['tokens']} tokens{priced}"
        if payload["refused"]:  # the chat reasoner told the model why, and asked again
            said += f"; refused, asked again: {payload['refused']}"
        return said
    # any other kind: its first three fields, as a person reads them
    detail = "; ".join(f"{k} {readable(v, 40)}" for k, v in list(payload.items())[:3])
    return kind + (f" ({detail})" if detail else "")


def call_line(call: CallView) -> str:
    """``✓ local/run-tests: exit status 0``: the tool and its output's first line, as
    ``plan explain`` shows them; ``✗`` for a call that failed, with the line that says why
    (``exit status 1: FAILED tests/test_calc.py::test_add - assert -1 == 5``)."""
    mark = "·" if call.ok is None else "✓" if call.ok else "✗"  # ·: no outcome recorded
    first = next((line.strip() for line in call.output.splitlines() if line.strip()), "")
    if call.ok is False and first:
        first = failure_summary(call.output)
    first = first.removeprefix(f"{call.tool}: ")  # a refusal names its tool: said once
    return f"{mark} {call.tool}: {first or '(no output)'}"


def wait_text(wait: Wait) -> str:
    """``waiting for openai:gpt-4o-mini · 12 s`` (``3 min 05 s`` past a minute): what a plan
    waits on, and for how long so far; the CLI's row, the app's status bar, the replay."""
    whole = int(wait.seconds())
    took = f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"
    return f"{wait.what} · {took}"


def plan_wait_text(plan_id: str) -> str:
    """What the plan waits on now, or while it runs child plans what one of them does
    (``[guide] waiting for openai:gpt-4o-mini · 4 s``): for the app, which shows one plan.
    Empty when nothing is noticed. Read in memory: no store."""
    found = family_wait(plan_id)
    if found is None:
        return ""
    action, wait = found
    return (f"[{action.rsplit('/', 1)[-1]}] " if action else "") + wait_text(wait)


class ProgressLines:
    """The CLI's line for each decision or event of a run; None for what it does not show.

    The plan the command ran needs no naming; a child plan's lines start with its action's
    name (``[write-docs]``, then ``[write-docs 2]`` for a second child of that action), which
    the ``child plan ID started (ACTION)`` line ties to its id. Each line is cut to ``width``.
    """

    def __init__(self, root_plan_id: str | None, width: int = LINE_LIMIT) -> None:
        self.root_plan_id = root_plan_id
        self.width = width
        self._labels: dict[str, str] = {}

    def line(self, happened: Happened) -> str | None:
        event = happened.event
        if happened.plan_id == self.root_plan_id:
            whose = ""
        elif event is not None and event.kind == "plan_created":  # said by "child … started"
            return None
        else:
            whose = f"[{self._label(happened.plan_id, happened.action)}] "
        if happened.call is not None:
            return shorten(f"  {whose}  {call_line(happened.call)}", self.width)
        row = happened.decision
        if row is not None:
            remade = " (re-made)" if row.is_correction else ""
            text = f"#{row.sequence_number} {row.phase} {row.decision_type}: {row.chosen_option}"
            return shorten(f"  {whose}{text}{remade}", self.width)
        if event is None or event.kind in _NOT_SHOWN:
            return None
        return shorten(f"  {whose}· {event_line(event)}", self.width)

    def wait_line(self, waiting: Waiting) -> str:
        """``⋯ waiting for openai:gpt-4o-mini · 12 s``: what a plan waits on now."""
        plan_id, wait = waiting.plan_id, waiting.wait
        whose = "" if plan_id == self.root_plan_id else f"[{self._label(plan_id, waiting.action)}] "
        return shorten(f"  {whose}⋯ {wait_text(wait)}", self.width)

    def _label(self, plan_id: str, action: str) -> str:
        if plan_id not in self._labels:
            name = action.rsplit("/", 1)[-1]
            taken = set(self._labels.values())
            label, n = name, 1
            while label in taken:
                n += 1
                label = f"{name} {n}"
            self._labels[plan_id] = label
        return self._labels[plan_id]
