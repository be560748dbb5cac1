"""What a plan's runner in this process is waiting on now: a model's reply or a tool call.

Nothing is recorded until a model call or a tool call ends, so a slow model or a long test
run would leave the progress lines and the app's status silent for minutes. The runner
names each wait here (:func:`waiting_on`), and the readers in the same process — the CLI's
progress, the app — show it with the time it has taken. Not stored: a wait belongs to the
process that runs the plan, and ends with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

NOTICED_AFTER = 1.0  # seconds: a quick call is not worth saying (nor a flash on screen)


@dataclass(frozen=True)
class Wait:
    """``what`` the plan waits on (``openai:gpt-4o-mini``, ``local/run-tests``), since
    ``started`` (``time.monotonic()``)."""

    what: str
    started: float

    def seconds(self) -> float:
        return time.monotonic() - self.started


_lock = threading.Lock()
_waits: dict[str, Wait] = {}
_children: dict[str, dict[str, str]] = {}  # a plan running child plans: each id, its action


@contextmanager
def waiting_on(plan_id: str, what: str) -> Iterator[None]:
    """Name the wait of ``plan_id`` while the block runs."""
    with _lock:
        before = _waits.get(plan_id)
        _waits[plan_id] = Wait(what, time.monotonic())
    try:
        yield
    finally:
        with _lock:
            if before is None:
                _waits.pop(plan_id, None)
            else:
                _waits[plan_id] = before


def waits(plan_ids: Iterable[str]) -> dict[str, Wait]:
    """The waits of those of ``plan_ids`` that wait now, and have for
    :data:`NOTICED_AFTER` seconds at least."""
    with _lock:
        found = {p: w for p in plan_ids if (w := _waits.get(p)) is not None}
    return {p: w for p, w in found.items() if w.seconds() >= NOTICED_AFTER}


@contextmanager
def running_children(plan_id: str, children: Mapping[str, str]) -> Iterator[None]:
    """While ``plan_id`` runs its child plans (``children``: each one's id and action), a
    reader of its wait is told theirs (:func:`family_wait`): the parent itself waits on
    nothing but them."""
    with _lock:
        _children[plan_id] = dict(children)
    try:
        yield
    finally:
        with _lock:
            _children.pop(plan_id, None)


def family_wait(plan_id: str) -> tuple[str | None, Wait] | None:
    """What ``plan_id`` waits on, or while it runs child plans, what the first of them that
    waits does (and that child's action; its own children's, and so on down): for a reader
    that shows one plan, as the app's status bar does. None: nothing noticed."""
    with _lock:
        children = dict(_children.get(plan_id, {}))
    own = waits([plan_id]).get(plan_id)
    if own is not None:
        return None, own
    for child, action in children.items():
        found = family_wait(child)
        if found is not None:
            return found[0] or action, found[1]
    return None
