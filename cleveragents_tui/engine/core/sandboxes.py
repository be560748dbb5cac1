"""The sandboxes of a plan: where they live, which strategy makes each, which were written.

Each (plan, resource) pair gets its own folder ``<base>/<plan_id>/<namespace>__<name>``;
``base`` is ``AGENTS_SANDBOX_DIR`` or ``sandboxes/`` in the user data folder. When a sandbox
is created its baseline is checkpointed at once (a ``pre_write`` checkpoint, the first of
the resource, which pruning always keeps): rolling back to a decision made before the
resource was first written means going back to that baseline.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable, Mapping
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING

from cleveragents_tui.domain.checkpoint import CheckpointMetadata
from cleveragents_tui.domain.enums import CheckpointType, SandboxStrategyName
from cleveragents_tui.domain.errors import NotFoundError, UserError
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import HandsOutPaths, Sandbox, SandboxStrategy, start_again_fix
from cleveragents_tui.store.store import Store

if TYPE_CHECKING:
    from cleveragents_tui.store.recording import Recording

ENV_VAR = "AGENTS_SANDBOX_DIR"

# Imported on first use: read-only paths never need the strategies.
_STRATEGIES: dict[SandboxStrategyName, tuple[str, str]] = {
    SandboxStrategyName.GIT_WORKTREE: (
        "cleveragents_tui.sandbox.git",
        "GitWorktreeStrategy",
    ),
    SandboxStrategyName.FILESYSTEM_COPY: (
        "cleveragents_tui.sandbox.filesystem_copy",
        "FilesystemCopyStrategy",
    ),
    SandboxStrategyName.OVERLAY: ("cleveragents_tui.sandbox.overlay", "OverlayStrategy"),
    # A copy of the file for SQLite, savepoints for PostgreSQL: sandbox/database.py.
    SandboxStrategyName.TRANSACTION_ROLLBACK: (
        "cleveragents_tui.sandbox.database",
        "DatabaseStrategy",
    ),
    SandboxStrategyName.NONE: ("cleveragents_tui.sandbox.none", "NoneStrategy"),
}


def strategy_for(name: SandboxStrategyName) -> SandboxStrategy:
    module, cls = _STRATEGIES[name]
    strategy: SandboxStrategy = getattr(import_module(module), cls)()
    return strategy


def sandbox_base_dir() -> Path:
    configured = os.environ.get(ENV_VAR)
    if configured:
        return Path(configured).expanduser().resolve()
    from platformdirs import user_data_path

    return user_data_path("cleveragents", appauthor=False) / "sandboxes"


def sandbox_root(base: Path, plan_id: str, resource_id: str) -> Path:
    """The folder of one plan's sandbox of one resource (ids are validated, so no traversal)."""
    namespace, name = resource_id.split("/")
    return base / plan_id / f"{namespace}__{name}"


class PlanSandboxes:
    """One plan's sandboxes, opened lazily, and the set of resources written so far.

    A resource counts as modified once a tool wrote to it (``note_write``) or once it has a
    decision checkpoint in this plan (so the set survives a restart).
    """

    def __init__(
        self,
        store: Store,
        plan_id: str,
        base_dir: Path | None = None,
        *,
        host_plan_id: str | None = None,
        resources: Mapping[str, Resource] | None = None,
    ) -> None:
        """``host_plan_id`` and ``resources`` (by id): given when already read (a correction's
        preview reads them in its snapshot), so that opening a sandbox reads nothing more."""
        self.store = store
        self.plan_id = plan_id
        self.base_dir = base_dir or sandbox_base_dir()
        if host_plan_id is None:
            with store.unit_of_work() as uow:
                # An append-mode corrective plan works in its parent's sandboxes.
                host_plan_id = uow.plan_actions.sandbox_plan(plan_id)
        self.host_plan_id = host_plan_id
        self._resources = resources or {}
        self._open: dict[str, Sandbox] = {}
        self._written: set[str] = set()
        # What the store says was modified, and the last resource_written event read: each
        # recording reads only the events since (issue 22), not the whole plan again.
        self._stored: set[str] | None = None
        self.seen_event = 0  # the last resource_written event modified() read
        # Per resource: (room, n) — how many more live checkpoints its budget takes, as
        # counted when this instance recorded the plan's decision n-1; a recording of
        # decision n skips the count while there is room (engine/core/checkpoints.py).
        self.budget_room: dict[str, tuple[int, int]] = {}

    def reopened(self) -> PlanSandboxes:
        """The same plan's sandboxes with none open: each is opened afresh from its folder
        (another object may have changed it since: a revert's replay runs in sandboxes of
        its own), with the host and the resources read already, so opening reads nothing."""
        return PlanSandboxes(
            self.store,
            self.plan_id,
            self.base_dir,
            host_plan_id=self.host_plan_id,
            resources=self._resources,
        )

    def create(self, resource: Resource) -> Sandbox:
        """Make the sandbox of ``resource`` for this plan and checkpoint its baseline."""
        root = sandbox_root(self.base_dir, self.plan_id, resource.resource_id)
        root.mkdir(parents=True, exist_ok=True)
        sandbox = strategy_for(resource.sandbox_strategy).create(resource, self.plan_id, root)
        self._open[resource.resource_id] = sandbox
        _track_handouts(sandbox)
        if resource.rollbackable:
            self.checkpoint_now(sandbox)  # the baseline
        return sandbox

    def checkpoint_now(self, sandbox: Sandbox) -> CheckpointMetadata:
        """Checkpoint ``sandbox`` (one of this plan's) outside any decision, and store the
        row: a sandbox's baseline, or a checkpoint before a write."""
        self.budget_room.pop(sandbox.resource.resource_id, None)  # a live row it did not count
        row = CheckpointMetadata(
            plan_id=self.plan_id,
            resource_id=sandbox.resource.resource_id,
            checkpoint_type=CheckpointType.PRE_WRITE,
            strategy=sandbox.resource.sandbox_strategy,
            ref=sandbox.checkpoint(),
        )
        with self.store.unit_of_work(write=True) as uow:
            uow.checkpoints.add(row)
            uow.commit()
        return row

    def clear_interrupted(self, resource: Resource) -> None:
        """Remove this plan's sandbox of ``resource``, whole or what a crash left while it was
        being made (its baseline checkpoint was never recorded), so it can be made again."""
        root = sandbox_root(self.base_dir, self.plan_id, resource.resource_id)
        strategy = strategy_for(resource.sandbox_strategy)
        with contextlib.suppress(UserError):  # it may be too incomplete to open
            strategy.open(resource, self.plan_id, root).discard()
        if resource.sandbox_strategy is SandboxStrategyName.GIT_WORKTREE:
            from cleveragents_tui.sandbox.git import clear_leftovers

            clear_leftovers(resource, self.plan_id, root)
        shutil.rmtree(root, ignore_errors=True)
        self._open.pop(resource.resource_id, None)

    def recreate(self, resource_id: str) -> Sandbox:
        """Discard this plan's sandbox of ``resource_id`` and make it anew from the real
        resource: how a sandbox without checkpoints (checkpointing off) goes back to its
        state before Execute."""
        with self.store.unit_of_work() as uow:
            resource = uow.resources.get(resource_id)
        self.clear_interrupted(resource)
        return self.create(resource)

    def get(self, resource_id: str) -> Sandbox:
        """The open sandbox of ``resource_id``, reopening one made earlier if needed."""
        sandbox = self._open.get(resource_id)
        if sandbox is None:
            resource = self._resources.get(resource_id)
            if resource is None:
                with self.store.unit_of_work() as uow:
                    resource = uow.resources.get(resource_id)
            root = sandbox_root(self.base_dir, self.host_plan_id, resource_id)
            if not root.exists():
                self._check_named(resource_id)
                raise NotFoundError(
                    f"plan {self.plan_id} has no sandbox of {resource_id} in {self.base_dir}",
                    "if the plan ran with another sandbox folder, set AGENTS_SANDBOX_DIR to it "
                    "and retry; if the sandbox was deleted, its work is gone: "
                    + start_again_fix(self.plan_id),
                )
            strategy = strategy_for(resource.sandbox_strategy)
            sandbox = strategy.open(resource, self.host_plan_id, root)
            self._open[resource_id] = sandbox
            _track_handouts(sandbox)
        return sandbox

    def _check_named(self, resource_id: str) -> None:
        """Refuse a resource the plan's action does not name (a tool call on another one)
        as that, not as a sandbox folder gone missing."""
        with self.store.unit_of_work() as uow:
            if not uow.plan_actions.has(self.plan_id):
                return  # a recorded sample: nothing runs on it
            named = uow.plan_actions.get(self.plan_id).get("resources")
        resources = [str(r) for r in named] if isinstance(named, list) else []
        if resource_id not in resources:
            raise NotFoundError(
                f"resource {resource_id} is not a resource of plan {self.plan_id}",
                f"name one of its resources: {', '.join(resources) or 'it has none'}",
            )

    def note_write(self, resource_id: str) -> None:
        """Tools call this when they write to a resource: it joins every later checkpoint
        group. The first write of each resource is also stored (a ``resource_written``
        event), so a decision recorded by another process after a restart still includes
        it — otherwise a revert to that decision would take the resource back to baseline."""
        if resource_id in self._written:
            return
        self._written.add(resource_id)
        with self.store.unit_of_work(write=True) as uow:
            uow.events.append("resource_written", {"resource": resource_id}, plan_id=self.plan_id)
            uow.commit()

    def modified(self, rec: Recording | None = None) -> set[str]:
        """Written by a tool (in this process or, stored, in another one), or already in a
        decision's checkpoint group.

        The set only grows (events and checkpoint rows are never removed), so the plan's
        checkpoint rows are read once per instance and later calls read only the
        ``resource_written`` events stored since the last call: a few rows, whatever the
        plan's size. Every resource in a decision group was written first (and its write
        stored), so the new events are all a later call can miss. ``rec``: read in that
        transaction (the recorder's, which reads the sequence number too)."""
        if rec is None:
            with self.store.recording() as own:
                return self.modified(own)
        if self._stored is None:
            self._stored = rec.resources_checkpointed(self.plan_id)
        written, self.seen_event = rec.resources_written_since(self.plan_id, self.seen_event)
        self._stored |= written
        return self._written | self._stored

    def open_ids(self) -> Iterable[str]:
        return tuple(self._open)


def _track_handouts(sandbox: Sandbox) -> None:
    """Tools ask for ``workdir``, or name the paths they write (``hand_out``), before each
    write, so a sandbox that can use it (git_worktree) may skip re-examining every file."""
    if isinstance(sandbox, HandsOutPaths):
        sandbox.track_handouts()
