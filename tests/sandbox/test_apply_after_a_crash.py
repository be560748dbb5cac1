"""A file sandbox's Apply stopped at any path it writes is finished by applying again.

A crash while ``apply`` writes the real folder leaves some paths holding the plan's content
and the sandbox's own record saying nothing landed. The next ``apply`` (another process:
the sandbox is opened again) must take those paths for the plan's own content, not for
changes someone made since the sandbox was made, and land the rest, leaving the folder
exactly as an uninterrupted Apply does. Before, it was refused for good ("... changed in
... since the sandbox was made"). A path someone really changed is still refused.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import pytest

from cleveragents_tui import failpoints
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import Sandbox, SandboxError
from cleveragents_tui.sandbox.filesystem_copy import FilesystemCopyStrategy
from cleveragents_tui.sandbox.overlay import OverlaySandbox, OverlayStrategy
from tests.sandbox.test_filesystem_copy import build_tree, fs_resource, tree_state
from tests.sandbox.test_overlay import disk_state, mess_up, overlay_resource


def _copy_changes(sandbox: Sandbox) -> None:
    workdir = sandbox.workdir
    assert workdir is not None
    (workdir / "README.md").write_bytes(b"changed\n")
    (workdir / "added" / "inner").mkdir(parents=True)
    (workdir / "added" / "inner" / "x.bin").write_bytes(b"\x01\x02")
    (workdir / "docs" / "guide.txt").unlink()
    shutil.rmtree(workdir / "src" / "pkg")
    (workdir / "src" / "pkg").write_bytes(b"a file now")


def _overlay_changes(sandbox: Sandbox) -> None:
    assert isinstance(sandbox, OverlaySandbox)  # the overlay strategy made it
    mess_up(sandbox)


class _Strategy(Protocol):
    """What these tests use of a file sandbox's strategy: ``SandboxStrategy`` without its
    ``name``, which these strategies keep on their class."""

    def create(self, resource: Resource, plan_id: str, root: Path) -> Sandbox: ...

    def open(self, resource: Resource, plan_id: str, root: Path) -> Sandbox: ...


STRATEGIES: dict[str, tuple[Callable[[], _Strategy], Callable[[Path], Resource], Callable[[Sandbox], None]]] = {
    "filesystem_copy": (lambda: FilesystemCopyStrategy(durable=False), fs_resource, _copy_changes),
    "overlay": (lambda: OverlayStrategy(durable=False), overlay_resource, _overlay_changes),
}  # fmt: skip


def _made(tmp_path: Path, name: str, kind: str) -> tuple[Sandbox, Path, str]:
    make, resource, change = STRATEGIES[kind]
    real = tmp_path / name
    real.mkdir()
    build_tree(real)
    plan_id = new_ulid()
    sandbox = make().create(resource(real), plan_id, tmp_path / f"{name}-sandboxes")
    change(sandbox)
    return sandbox, real, plan_id


def _state(kind: str, root: Path) -> object:
    return disk_state(root) if kind == "overlay" else {
        path: value[:3] for path, value in tree_state(root).items()
    }  # fmt: skip


def _tree_writes(tmp_path: Path, kind: str) -> tuple[int, object]:
    """How many tree writes an uninterrupted Apply makes, and what it leaves."""
    sandbox, real, _ = _made(tmp_path, "reference", kind)
    failpoints.reset()
    sandbox.apply()
    return failpoints.hits().get("fs.write", 0), _state(kind, real)


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_an_apply_stopped_at_any_write_is_finished_by_applying_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    writes, expected = _tree_writes(tmp_path, kind)
    assert writes > 3
    make, resource, _ = STRATEGIES[kind]
    for nth in range(1, writes + 1):
        sandbox, real, plan_id = _made(tmp_path, f"real{nth}", kind)
        monkeypatch.setenv(failpoints.ENV_VAR, f"fs.write#{nth}")
        failpoints.reset()
        with pytest.raises(failpoints.InjectedFault):
            sandbox.apply()
        monkeypatch.delenv(failpoints.ENV_VAR)
        again = make().open(resource(real), plan_id, tmp_path / f"real{nth}-sandboxes")
        again.apply()
        assert _state(kind, real) == expected, f"stopped at write {nth}"


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_a_path_someone_changed_is_still_refused(tmp_path: Path, kind: str) -> None:
    sandbox, real, _ = _made(tmp_path, "real", kind)
    (real / "README.md").write_bytes(b"someone else's\n")
    with pytest.raises(SandboxError, match=r"since the sandbox was made: README\.md"):
        sandbox.apply()
    assert (real / "README.md").read_bytes() == b"someone else's\n"
