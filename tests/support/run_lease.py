"""Holding a plan's run lease from another thread of the test process."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from cleveragents_tui.engine.run import run_lease


@contextmanager
def held_by_another_thread(base: Path, plan_id: str, *doings: str) -> Iterator[None]:
    """While the block runs, another thread holds ``plan_id`` (nested once per ``doings``,
    outermost first, as a correction's replay holds it inside the correction)."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with ExitStack() as stack:
            for doing in doings:
                stack.enter_context(run_lease.holding(base, plan_id, doing))
            held.set()
            release.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        held.wait()
        yield
    finally:
        release.set()
        thread.join()
