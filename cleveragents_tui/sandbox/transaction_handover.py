"""Handing a database sandbox over between processes: any process can correct.

A ``transaction_rollback`` sandbox keeps its work in one open database transaction, and a
transaction belongs to one connection of one process. Were the process that ran a plan (an
app window, a browser tab) to keep it open while it sits idle, no other process could roll
the database back, and on SQLite no one else could even write to it (``BEGIN IMMEDIATE``
holds the file's write lock). So the transaction is held only while it is used:

* **In use** means: while this process holds the plan's run lease (``engine/run/run_lease.py``:
  running, applying, correcting, repairing), or while a short read pins the plan's sandbox
  folder (:func:`pinned`: the invariant checker of ``agents doctor``). The run lease pins
  ``<sandboxes>/<plan>`` for as long as it is held.
* **Handing over**: when the last pin of a folder ends, every sandbox this process holds
  that no pin still covers is handed over
  (:meth:`~cleveragents_tui.sandbox.transaction.replay.ReplayingSandbox.hand_over`):
  its state file is brought up to date, its transaction is rolled back (nothing of it was
  committed: every statement is already in the fsynced statement log), its connection is
  closed and its ``flock`` released. Its object stays in this process, *released*.
* **Taking it back**: the next use, in any process, replays the statement log into a new
  transaction (``transaction/replay.py``; docs/sandboxes.md). In the process that
  handed it over, that is the same object: it rereads the state file and the log, so it sees
  whatever another process did meanwhile (a correction rolled the database back and replayed
  the plan), never its own earlier transaction. When no one else held it meanwhile (the
  state file's token is still its own), the row snapshots of checkpoints rolled back over
  are kept for diffs.

A sandbox whose statement log cannot be replayed (a parameter JSON cannot carry, a log
that could not be written) is not handed over: its transaction is the only copy of that
work, so the process keeps holding it and another process is told so.

One object per sandbox folder per process (:func:`registered`), so an idle window's cached
objects and a new lookup never compete for the lock. A process started by ``fork`` does not
inherit the holds of its parent (:func:`_after_fork`): it closes its copy of every lock (or
the parent's hand-over would not free the sandbox while the child lives) and never touches
the parent's connections.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)


class Holder(Protocol):
    """What the registry needs of a sandbox that holds a transaction across calls."""

    @property
    def root(self) -> Path: ...

    @property
    def held(self) -> bool:
        """Whether this process holds its transaction now."""
        ...

    def hand_over(self) -> bool:
        """Let go of the transaction (the next use replays the log); False when it must be
        kept (the log cannot be replayed)."""
        ...

    def forget_after_fork(self) -> None:
        """In a forked child: let go of the parent's lock and connection without using them."""
        ...


_GUARD = threading.Lock()
_REGISTERED: dict[Path, Holder] = {}
_PINS: Counter[Path] = Counter()


def _key(path: Path) -> Path:
    return path.resolve()


def register(holder: Holder) -> None:
    """``holder`` is this process's object for its folder from now on."""
    with _GUARD:
        _REGISTERED[_key(holder.root)] = holder


def registered(root: Path) -> Holder | None:
    """This process's object for the sandbox folder ``root``, if it has one."""
    with _GUARD:
        return _REGISTERED.get(_key(root))


def is_pinned(root: Path) -> bool:
    """Whether a run lease or a read of this process covers the folder ``root``."""
    key = _key(root)
    with _GUARD:
        return _covered(key)


def _covered(key: Path) -> bool:
    return any(key == folder or key.is_relative_to(folder) for folder in _PINS)


@contextmanager
def pinned(folder: Path) -> Iterator[None]:
    """Keep the sandboxes under ``folder`` that this process holds while the block runs;
    when the last pin of ``folder`` ends, hand over every held sandbox no pin covers."""
    key = _key(folder)
    with _GUARD:
        _PINS[key] += 1
    try:
        yield
    finally:
        with _GUARD:
            _PINS[key] -= 1
            last = _PINS[key] <= 0  # below 0 only after a fork cleared the pins
            if last:
                del _PINS[key]
        if last:
            hand_over_unpinned()


def hand_over_unpinned() -> None:
    """Hand over every sandbox this process holds that no pin covers (called as a pin ends;
    never raises: a sandbox that cannot be handed over stays held and says why when asked)."""
    with _GUARD:
        idle = [holder for key, holder in _REGISTERED.items() if holder.held and not _covered(key)]
    for holder in idle:
        if is_pinned(holder.root):  # pinned again meanwhile: in use
            continue
        try:
            if not holder.hand_over():
                log.warning(
                    "kept the database sandbox under %s: it cannot be replayed", holder.root
                )
        except Exception:  # a hand-over failing must not fail the run that just ended
            log.exception("handing over the database sandbox under %s failed", holder.root)


def _after_fork() -> None:
    global _GUARD
    _GUARD = threading.Lock()  # another thread may have held it at the fork
    for holder in _REGISTERED.values():
        holder.forget_after_fork()  # they stay registered, released: a use replays here
    _PINS.clear()


os.register_at_fork(after_in_child=_after_fork)
