"""Whose sandbox a folder holds, and the real directory a filesystem resource names."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from cleveragents_tui.domain.ids import parse_ulid
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.objectstore.files import read_json_object

META = "sandbox.json"


@dataclass(frozen=True)
class Identity:
    """Whose sandbox a folder holds; kept in its ``sandbox.json`` and checked on open."""

    strategy: str
    plan_id: str
    resource_id: str
    location: str

    @staticmethod
    def of(strategy: str, resource: Resource, plan_id: str, location: Path) -> Identity:
        return Identity(
            strategy, parse_ulid(plan_id, "plan id"), resource.resource_id, str(location)
        )

    def meta(self, **extra: object) -> dict[str, object]:
        return {"v": 1, **asdict(self), **extra}

    def claim(self, root: Path) -> None:
        """Make ``root`` this sandbox's folder: new or empty, one sandbox per folder."""
        if (root / META).exists():
            raise SandboxError(
                f"a sandbox already exists in {root}", "open it, or discard it first"
            )
        root.mkdir(parents=True, exist_ok=True)
        if any(root.iterdir()):
            raise SandboxError(f"{root} is not empty", "give each sandbox a folder of its own")

    def check(self, root: Path) -> dict[str, object]:
        """The ``sandbox.json`` in ``root``, refused unless it is this sandbox's."""
        if not (root / META).is_file():
            raise SandboxError(f"no {self.strategy} sandbox in {root}", "create it first")
        meta = read_json_object(root / META)
        if any(meta.get(key) != value for key, value in asdict(self).items()):
            raise SandboxError(
                f"the sandbox in {root} is not the {self.strategy} sandbox of "
                f"{self.resource_id} at {self.location} for plan {self.plan_id}",
                "check the folder, the plan and the resource",
            )
        return meta


def resource_directory(resource: Resource) -> Path:
    """The real directory a filesystem resource names, resolved once."""
    path = Path(resource.location).expanduser()
    if not path.is_absolute() or not path.is_dir():
        raise SandboxError(
            f"resource {resource.resource_id}: {resource.location!r} is not a directory",
            "give the absolute path of an existing directory",
        )
    return path.resolve()
