"""What the filesystem_copy and overlay sandboxes share: a folder of their own, checked to be
the named plan's and resource's, an object store in it, and the strategy that makes them.

Each sandbox says how it fills a new folder (``initialise``) and reads an existing one
(``load``); making, opening, discarding and refusing a discarded sandbox are here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar, Generic, TypeVar

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import OfResource, SandboxError
from cleveragents_tui.sandbox.home import Identity, resource_directory
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.objectstore.tree_writer import remove_tree


class DirectorySandbox(OfResource, ABC):
    """One directory resource's sandbox for one plan, kept in the folder ``home``."""

    def __init__(
        self, resource: Resource, identity: Identity, home: Path, real: Path, *, durable: bool
    ) -> None:
        self._resource = resource
        self._identity = identity
        self._home = home
        self._real = real
        self._durable = durable
        self._store = ObjectStore(home / "objects", durable=durable)
        self._discarded = False

    @abstractmethod
    def initialise(self) -> None:
        """Fill the new, empty folder from the real directory."""

    @abstractmethod
    def load(self, meta: dict[str, object]) -> None:
        """Read the folder back (``meta``: its checked ``sandbox.json``)."""

    @property
    def home(self) -> Path:
        """The folder holding everything this sandbox stores (the ``root`` it was made in)."""
        return self._home

    def discard(self) -> None:
        """Remove the sandbox's folder and everything in it (again: nothing to do)."""
        if self._discarded:
            return
        remove_tree(self._home)
        self._discarded = True

    def _alive(self) -> None:
        if self._discarded:
            raise SandboxError(
                f"the sandbox of {self._resource.resource_id} was discarded", "create a new one"
            )


SandboxT = TypeVar("SandboxT", bound=DirectorySandbox)


class DirectoryStrategy(Generic[SandboxT]):
    """Makes and reopens one kind of :class:`DirectorySandbox`.

    ``durable`` (default) flushes every checkpoint to the disk before its reference is
    returned, so a reference stored in the database survives a power cut.
    """

    name: ClassVar[SandboxStrategyName]
    sandbox_type: type[SandboxT]

    def __init__(self, *, durable: bool = True) -> None:
        self._durable = durable

    def create(self, resource: Resource, plan_id: str, root: Path) -> SandboxT:
        """A new sandbox in ``root``, which must be new or empty: the sandbox owns it."""
        sandbox, identity = self._sandbox(resource, plan_id, root)
        identity.claim(root)
        try:
            sandbox.initialise()
        except BaseException:
            remove_tree(root)
            raise
        return sandbox

    def open(self, resource: Resource, plan_id: str, root: Path) -> SandboxT:
        sandbox, identity = self._sandbox(resource, plan_id, root)
        sandbox.load(identity.check(root))
        return sandbox

    def _sandbox(self, resource: Resource, plan_id: str, root: Path) -> tuple[SandboxT, Identity]:
        if resource.sandbox_strategy != self.name:
            raise SandboxError(
                f"resource {resource.resource_id} uses strategy {resource.sandbox_strategy}",
                "use the strategy the resource names",
            )
        real = resource_directory(resource)
        identity = Identity.of(self.name, resource, plan_id, real)
        sandbox = self.sandbox_type(resource, identity, root, real, durable=self._durable)
        return sandbox, identity
