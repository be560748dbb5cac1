"""What the database sandboxes share (savepoints in ``transaction/``, the SQLite and the
PostgreSQL copies): who they belong to, their state file and their ``flock``.

One place, so that the three strategies say the same thing for the same trouble (a damaged
state file, a sandbox of another plan, one discarded meanwhile). See docs/sandboxes.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, TypeVar

from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    CheckpointMissingError,
    OfPlan,
    SandboxError,
    start_again_fix,
)

APPLIED_FIX = "correct the plan with --mode=append (compensating changes)"

StateT = TypeVar("StateT")


class OwnedState(Protocol):
    """A state file's record of the resource and plan its sandbox belongs to."""

    @property
    def resource_id(self) -> str: ...

    @property
    def plan_id(self) -> str: ...


OwnedT = TypeVar("OwnedT", bound=OwnedState)


class DatabaseSandboxIdentity(OfPlan):
    """The resource, plan and folder of a database sandbox; no ``workdir``: tools reach the
    database through SQL."""

    def __init__(self, resource: Resource, plan_id: str, root: Path) -> None:
        self._resource = resource
        self._plan_id = plan_id
        self._root = root

    @property
    def workdir(self) -> Path | None:
        return None

    @property
    def root(self) -> Path:
        return self._root


def load_state_file(
    path: Path, parse: Callable[[dict[str, Any]], StateT], plan_id: str
) -> StateT | None:
    """The state file at ``path`` (of a sandbox of ``plan_id``) as ``parse`` reads its JSON;
    None when there is none.

    ``parse`` raises ValueError, KeyError, TypeError or UserError on a field it refuses:
    any of them means the file is damaged.
    """
    try:
        raw = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SandboxError(f"cannot read sandbox state {path}: {exc}") from exc
    try:
        return parse(json.loads(raw))
    except (ValueError, KeyError, TypeError, UserError) as exc:
        raise SandboxError(
            f"the sandbox state file {path} is damaged ({exc})", start_again_fix(plan_id)
        ) from exc


def owned_state(
    state: OwnedT | None, resource: Resource, plan_id: str, root: Path, kind: str
) -> OwnedT:
    """``state`` when it is the sandbox of ``resource`` for ``plan_id``; else why not.

    ``kind`` names the sandbox in the message (``database``, ``transaction_rollback``).
    """
    if state is None:
        raise SandboxError(
            f"no {kind} sandbox of {resource.resource_id} for plan {plan_id} under {root}: it "
            "was discarded or never created",
            start_again_fix(plan_id),
        )
    if state.resource_id != resource.resource_id or state.plan_id != plan_id:
        raise SandboxError(
            f"the sandbox under {root} belongs to {state.resource_id} of plan "
            f"{state.plan_id}, not to {resource.resource_id} of plan {plan_id}",
            "open the sandbox folder of this resource and plan",
        )
    return state


@contextlib.contextmanager
def locked_state(
    root: Path, lock_name: str, owner: OfPlan, load: Callable[[], StateT | None]
) -> Iterator[StateT]:
    """The folder's ``flock`` (waiting for it), then the state ``load`` reads under it.

    For the copy sandboxes: one operation at a time across processes. The folder gone or the
    state file deleted means the sandbox was discarded.
    """
    try:
        fd = os.open(root / lock_name, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise SandboxError(
            f"the sandbox of {owner.resource.resource_id} under {root} is gone ({exc.strerror})",
            start_again_fix(owner.plan_id),
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        state = load()
        if state is None:
            raise SandboxError(
                f"the sandbox of {owner.resource.resource_id} under {root} was discarded",
                start_again_fix(owner.plan_id),
            )
        yield state
    finally:
        os.close(fd)  # releases the flock


def applied_error(resource_id: str) -> SandboxError:
    """What a copy sandbox says to a checkpoint operation after Apply."""
    return CheckpointMissingError(
        f"the sandbox of {resource_id} was applied: its changes are in the real database",
        APPLIED_FIX,
    )
