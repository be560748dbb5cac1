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
from collections.abc import Iterable, Iterator
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
