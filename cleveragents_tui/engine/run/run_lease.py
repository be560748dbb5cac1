"""One runner per plan at a time, across processes and threads.

Two runners advancing the same plan (the app's run key pressed while ``agents plan run``
works in a terminal, or two browser tabs) would both record decisions and both land the
sandboxes. The database cannot tell whether a plan left *running* has a live runner or was
stopped by a crash; the kernel can: a runner holds ``flock`` on
``<sandboxes>/<plan>/runner.lock`` while it advances the plan, and the lock goes with its
process, so a crash never leaves a plan held. The file says which process holds it and what
it does (running, applying, correcting or repairing the plan), for the message only. Within
a process the lease is re-entrant on the thread that holds it (a correction replays the
plan; a run finishes an Apply a crash interrupted) and refused to other threads.

``doctor --repair`` takes it too: a checkpoint group a live runner is recording is pending
as well, and is left to that runner.

While held, the lease pins the plan's sandbox folder (``sandbox/transaction_handover.py``):
when this process lets go of the plan, it first hands over the database sandboxes it holds,
so a correction from any other process (a browser tab) can roll them back while this one
sits idle.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cleveragents_tui.domain.errors import ConcurrentChangeError
from cleveragents_tui.engine.core.sandboxes import sandbox_base_dir
from cleveragents_tui.sandbox import transaction_handover

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from cleveragents_tui.store.store import Store

RUNNER_LOCK = "runner.lock"
DOINGS = ("running", "applying", "correcting", "repairing", "discarding", "collecting")


class PlanBusyError(ConcurrentChangeError):
    """Another runner (process or thread) is advancing the plan."""


@dataclass
class _Held:
    thread: int
    doing: str
    fd: int
    depth: int
    shared: Connection | None = None  # PostgreSQL: the session holding the advisory lock


_GUARD = threading.Lock()
_HELD: dict[Path, _Held] = {}


@contextmanager
def holding(
    base_dir: Path | None, plan_id: str, doing: str, store: Store | None = None
) -> Iterator[None]:
    """Hold ``plan_id`` for this thread while the block runs, or raise PlanBusyError.
    ``base_dir`` is the sandbox folder (None: the default one); ``doing`` (one of
    :data:`DOINGS`) is what others are told. On PostgreSQL (``store``'s database) the lease
    is also an advisory lock on the server, so runners on other hosts — each with its own
    sandbox folder, sharing the database — are refused too."""
    path = ((base_dir or sandbox_base_dir()) / plan_id / RUNNER_LOCK).absolute()
    me = threading.get_ident()
    with _GUARD:
        held = _HELD.get(path)
        if held is None:
            fd = _take(path, plan_id, doing)
            try:
                shared = _take_shared(store, plan_id)
            except BaseException:
                os.close(fd)
                raise
            held = _HELD[path] = _Held(me, doing, fd, 0, shared)
        elif held.thread != me:
            raise _busy(plan_id, f"another task of this process is {held.doing} it")
        held.depth += 1
    try:
        # Released before the lease: whoever takes the plan next finds its databases free.
        with transaction_handover.pinned(path.parent):
            yield
    finally:
        with _GUARD:
            held.depth -= 1
            if held.depth == 0:
                del _HELD[path]
                os.close(held.fd)  # closing the last descriptor drops the flock
                if held.shared is not None:
                    from cleveragents_tui.store import advisory_lock

                    advisory_lock.unlock(held.shared, plan_id)


def held_by(base_dir: Path | None, plan_id: str, thread: int) -> bool:
    """Whether ``thread`` of this process holds ``plan_id`` now: the app's replay dialog
    tells its own correction's events from another tab's (the lease is held from before a
    correction starts to the end of its replay)."""
    path = ((base_dir or sandbox_base_dir()) / plan_id / RUNNER_LOCK).absolute()
    with _GUARD:
        held = _HELD.get(path)
        return held is not None and held.thread == thread


def is_held(base_dir: Path | None, plan_id: str, store: Store | None = None) -> bool:
    """Whether a live runner (this process or another; on PostgreSQL, ``store``'s, another
    host too) holds ``plan_id`` now. ``doctor`` asks it of plans left running; the probe
    takes the lock for an instant, so a runner starting at that very instant is told the
    plan is busy, as with any other holder."""
    path = ((base_dir or sandbox_base_dir()) / plan_id / RUNNER_LOCK).absolute()
    with _GUARD:
        if path in _HELD or _locally_held(path):
            return True
        try:
            shared = _take_shared(store, plan_id)
        except PlanBusyError:
            return True
        if shared is not None:
            from cleveragents_tui.store import advisory_lock

            advisory_lock.unlock(shared, plan_id)
    return False


def _locally_held(path: Path) -> bool:
    """Whether a process of this machine holds the lock file (probed with a shared flock)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False  # never run here: no runner ever held it
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops the probe's own lock
    return False


def _take(path: Path, plan_id: str, doing: str) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid, _, what = os.pread(fd, 64, 0).decode("ascii", "replace").strip().partition(" ")
        os.close(fd)
        who = f"process {pid}" if pid.isdigit() else "another process"
        raise _busy(plan_id, f"{who} is {what if what in DOINGS else 'running'} it") from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {doing}\n".encode("ascii"), 0)
    return fd


def _take_shared(store: Store | None, plan_id: str) -> Connection | None:
    """On PostgreSQL, the plan's advisory lock (None on SQLite: the flock is the lease)."""
    if store is None:
        return None
    from cleveragents_tui.store import advisory_lock

    if not advisory_lock.is_postgresql(store.engine):
        return None
    shared = advisory_lock.try_lock(store.engine, plan_id)
    if shared is None:
        raise _busy(plan_id, "an agents process using the same database holds it")
    return shared


def _busy(plan_id: str, who: str) -> PlanBusyError:
    return PlanBusyError(
        f"plan {plan_id} is busy: {who}",
        f"wait for that to end (`agents plan pause {plan_id}` stops a run after its current "
        "step), then try again",
    )
