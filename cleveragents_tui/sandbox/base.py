"""The SandboxStrategy protocol every sandbox implements (ADR-035, DESIGN.md section 5).

A *strategy* makes and reopens *sandboxes*; a sandbox is one resource's isolated copy for
one plan. Checkpoint references are opaque strings owned by the strategy (a commit SHA, a
manifest id, a layer number, a savepoint name) and are stored in ``checkpoint_metadata.ref``.
Every method either completes or raises :class:`SandboxError` leaving the sandbox as it was.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.resource import Resource


class SandboxError(UserError):
    """A sandbox operation failed; the message names the resource and what to do."""


class NothingLandedError(SandboxError):
    """Apply refused with the real resource as it was: nothing began landing, so a later
    Apply starts it afresh (and ``agents doctor`` has no half-landed Apply to report)."""


class CheckpointMissingError(SandboxError):
    """The checkpoint a reference names is gone or damaged (objects missing, savepoint lost)."""


class ChangeKind(StrEnum):
    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class Change:
    """One changed item: a file path (relative, POSIX) or, for databases, ``table/key``."""

    path: str
    kind: ChangeKind


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What landing the sandbox on the real resource did (a branch name, files copied, ...)."""

    summary: str
    changes: tuple[Change, ...]


class OfResource:
    """A sandbox's ``resource``: the one it was made for."""

    _resource: Resource

    @property
    def resource(self) -> Resource:
        return self._resource


def start_again_fix(plan_id: str) -> str:
    """The way on when a plan's sandbox is gone or its record cannot be trusted: without it
    the plan can neither run on nor land, so it is discarded and started again."""
    return f"agents plan discard {plan_id}, then start the plan again"


class OfPlan(OfResource):
    """A sandbox's ``resource`` and ``plan_id``: the plan it was made for."""

    _plan_id: str

    @property
    def plan_id(self) -> str:
        return self._plan_id


@runtime_checkable
class Sandbox(Protocol):
    """One resource's isolated copy for one plan."""

    @property
    def resource(self) -> Resource: ...

    @property
    def workdir(self) -> Path | None:
        """Where tools read and write; None for resources that are not directories."""
        ...

    def checkpoint(self) -> str:
        """Capture the current state; returns the reference to store."""
        ...

    def verify(self, ref: str) -> None:
        """Raise CheckpointMissingError unless ``ref`` exists and is intact."""
        ...

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        """Make the sandbox exactly equal to checkpoint ``ref`` (new items removed, deleted back).

        ``current``, when given, is a checkpoint the caller took of the sandbox's present
        state a moment ago, with nothing written since (the rollback protocol's safety
        checkpoint). A strategy may then change only what differs between the two
        checkpoints instead of examining everything; the result must be the same.
        """
        ...

    def diff(self, old_ref: str, new_ref: str) -> list[Change]:
        """What changed from ``old_ref`` to ``new_ref``, sorted by path."""
        ...

    def read(self, ref: str, path: str) -> bytes | None:
        """The content of ``path`` at checkpoint ``ref`` (None if absent there), for diff views."""
        ...

    def changes_since_baseline(self) -> list[Change]:
        """What changed in the sandbox's current state relative to the real resource at creation."""
        ...

    def drop_checkpoint(self, ref: str) -> None:
        """Forget a checkpoint (pruning, or undoing a failed group); other checkpoints stay valid."""
        ...

    def apply(self) -> ApplyResult:
        """Land the sandbox's changes on the real resource."""
        ...

    def discard(self) -> None:
        """Remove the sandbox and everything it stored; the real resource is untouched."""
        ...


@runtime_checkable
class PreviewsApply(Protocol):
    """A sandbox that can say what :meth:`Sandbox.apply` would land without writing anything
    (``agents plan apply --dry-run``): ``changes_since_baseline`` may write (objects, an
    index, a settled crash), a dry run must leave the sandbox exactly as it was."""

    def pending_changes(self) -> list[Change]:
        """What Apply would land now, as ``changes_since_baseline`` lists it, read only."""
        ...


@runtime_checkable
class ChecksApply(Protocol):
    """A sandbox that can say, without writing anything, whether :meth:`Sandbox.apply` would
    be refused now: the real resource changed where the plan changed it."""

    def apply_refusal(self) -> SandboxError | None:
        """The error Apply would raise now, before writing anything; None if it would land."""
        ...


@runtime_checkable
class HandsOutPaths(Protocol):
    """A sandbox whose checkpoints need not examine every file when it is told what may
    have changed (git_worktree). Whoever writes asks first: :attr:`Sandbox.workdir` for
    anything, :meth:`hand_out` for named paths (the engine's file tools); the engine
    promises so with :meth:`track_handouts` when it opens the sandbox."""

    def track_handouts(self) -> None:
        """From now on, trust that every write was preceded by a handout."""
        ...

    def hand_out(self, paths: Collection[str] | None) -> Path:
        """The workdir, for writing ``paths`` (relative, ``/``-separated) and nothing else;
        None: for anything (as ``workdir``)."""
        ...


@runtime_checkable
class ScratchCheckpoints(Protocol):
    """A sandbox that can take its state now as a checkpoint that is read and forgotten,
    writing nothing durable (filesystem_copy): a correction's diff reads the new attempt's
    state once, and a checkpoint made and dropped for it cost a record, a drop and a
    repack of the object store, five flushes in all."""

    def scratch_checkpoint(self) -> AbstractContextManager[str]:
        """A reference to the state now, good for ``diff`` and ``read`` inside the block."""
        ...


class SandboxStrategy(Protocol):
    """Creates sandboxes of one kind, and reopens them after a restart."""

    name: SandboxStrategyName

    def create(self, resource: Resource, plan_id: str, root: Path) -> Sandbox:
        """A new sandbox of ``resource`` for ``plan_id``; its files live under ``root``."""
        ...

    def open(self, resource: Resource, plan_id: str, root: Path) -> Sandbox:
        """The sandbox ``create`` made earlier (possibly in another process)."""
        ...
