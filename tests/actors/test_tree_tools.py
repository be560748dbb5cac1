"""The tree tools (move, delete, mkdir, symlink, chmod) and base64 writes on real sandboxes,
and what they refuse: every path and every link target stays inside the sandbox."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest

from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.sandbox.overlay import OverlaySandbox, OverlayStrategy
from tests.actors.conftest import API, CANARY, DB, FILES, GIT, LAYERED, OUTBOX, ToolWorld
from tests.actors.test_file_tools import content, mode

SANDBOXED = [GIT, FILES, LAYERED]


@pytest.fixture(params=SANDBOXED)
def resource(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def run(world: ToolWorld, tool: str, resource_id: str, **arguments: Any) -> Any:
    return world.call(tool, {"resource": resource_id, **arguments})


def link_of(world: ToolWorld, resource_id: str, path: str) -> str | None:
    sandbox = world.sandboxes.get(resource_id)
    if isinstance(sandbox, OverlaySandbox):
        entry = sandbox.stat(path)
        return None if entry is None or entry.kind != "symlink" else sandbox.read_link(path)
    target = world.workdir(resource_id) / path
    return os.readlink(target) if target.is_symlink() else None


def exists(world: ToolWorld, resource_id: str, path: str) -> bool:
    sandbox = world.sandboxes.get(resource_id)
    if isinstance(sandbox, OverlaySandbox):
        return sandbox.exists(path)
    return os.path.lexists(world.workdir(resource_id) / path)


def test_write_file_takes_any_bytes_as_base64(tool_world: ToolWorld, resource: str) -> None:
    data = bytes(range(256)) + b"\x00\r\n\xff"
    encoded = base64.b64encode(data).decode()
    wrapped = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    outcome = run(
        tool_world,
        "local/write-file",
        resource,
        path="bin/x.bin",
        content=wrapped,
        encoding="base64",
    )
    assert outcome.ok, outcome.output
    assert outcome.output == f"created bin/x.bin: {len(data)} bytes"
    assert content(tool_world, resource, "bin/x.bin") == data
    for bad, why in (("not base64!", "not valid base64"), ("QUJD", None)):
        result = run(
            tool_world, "local/write-file", resource, path="y.bin", content=bad, encoding="base64"
        )
        assert result.ok is (why is None), result.output
        if why:
            assert why in result.output
    unknown = run(
        tool_world, "local/write-file", resource, path="z.bin", content="x", encoding="latin-1"
    )
    assert not unknown.ok
    assert "encoding 'latin-1' is not known; use utf-8 or base64" in unknown.output
    assert not exists(tool_world, resource, "z.bin")


def test_move_renames_files_and_folders(tool_world: ToolWorld, resource: str) -> None:
    assert run(tool_world, "local/write-file", resource, path="d/a.txt", content="a\n").ok
    assert run(tool_world, "local/symlink", resource, path="d/link", target="a.txt").ok
    moved = run(tool_world, "local/move", resource, **{"from": "d", "to": "e/f"})
    assert moved.ok, moved.output
    assert moved.output == "moved folder d to e/f"
    assert moved.writes == (resource,)
    assert not exists(tool_world, resource, "d")
    assert content(tool_world, resource, "e/f/a.txt") == b"a\n"
    assert link_of(tool_world, resource, "e/f/link") == "a.txt"
    file = run(tool_world, "local/move", resource, **{"from": "e/f/a.txt", "to": "b.txt"})
    assert file.ok and file.output == "moved file e/f/a.txt to b.txt"
    taken = run(tool_world, "local/move", resource, **{"from": "b.txt", "to": "e/f/link"})
    assert not taken.ok
    assert "e/f/link already exists" in taken.output
    into = run(tool_world, "local/move", resource, **{"from": "e", "to": "e/f/g"})
    assert not into.ok and "cannot move e into itself" in into.output
    assert content(tool_world, resource, "b.txt") == b"a\n"


def test_delete_removes_folders_with_everything_in_them(
    tool_world: ToolWorld, resource: str
) -> None:
    assert run(tool_world, "local/write-file", resource, path="t/u/v.txt", content="v\n").ok
    assert run(tool_world, "local/symlink", resource, path="t/l", target="u/v.txt").ok
    outcome = run(tool_world, "local/delete", resource, path="t")
    assert outcome.ok and outcome.output == "deleted folder t"
    assert not exists(tool_world, resource, "t")
    missing = run(tool_world, "local/delete", resource, path="t")
    assert not missing.ok and "t does not exist" in missing.output
    old = run(tool_world, "local/delete-file", resource, path="nope")
    assert not old.ok  # the old name still works, files only


def test_mkdir_symlink_and_chmod(tool_world: ToolWorld, resource: str) -> None:
    made = run(tool_world, "local/mkdir", resource, path="a/b", mode="0750")
    assert made.ok and made.output == "created folder a/b (mode 0750)"
    assert mode(tool_world, resource, "a/b") == 0o750
    again = run(tool_world, "local/mkdir", resource, path="a/b")
    assert again.ok and again.output == "a/b is already a folder; nothing changed"
    assert run(tool_world, "local/write-file", resource, path="a/f.txt", content="f\n").ok
    over = run(tool_world, "local/mkdir", resource, path="a/f.txt")
    assert not over.ok and "a/f.txt exists and is a file, not a folder" in over.output
    linked = run(tool_world, "local/symlink", resource, path="a/b/up", target="../f.txt")
    assert linked.ok and linked.output == "linked a/b/up -> ../f.txt"
    assert link_of(tool_world, resource, "a/b/up") == "../f.txt"
    assert run(tool_world, "local/chmod", resource, path="a/f.txt", mode="600").ok
    assert mode(tool_world, resource, "a/f.txt") == 0o600
    assert run(tool_world, "local/chmod", resource, path="a", mode="0o700").ok
    assert mode(tool_world, resource, "a") == 0o700
    for path, bad, why in (
        ("a/f.txt", "0000", "keep at least 0400 for the owner"),
        ("a", "0644", "keep at least 0700 for the owner"),
        ("a/f.txt", "4755", "not allowed"),
        ("a/f.txt", "rwx", "not octal permission bits"),
        ("a/b/up", "0644", "symlinks have no mode"),
        ("nope", "0644", "nope does not exist"),
    ):
        outcome = run(tool_world, "local/chmod", resource, path=path, mode=bad)
        assert not outcome.ok, (path, bad)
        assert why in outcome.output, outcome.output
        assert "\n" not in outcome.output
    assert mode(tool_world, resource, "a/f.txt") == 0o600


LINKS_OUT = [
    ("evil", "/etc/passwd", "points outside the sandbox"),
    ("evil", "../../x", "points outside the sandbox"),
    ("a/evil", "../../x", "points outside the sandbox"),
    ("a/evil", "b/../../../x", "uses '..' after a name"),
    ("evil", ".git/config", "points into git's metadata"),
    ("a/evil", "../.git", "points into git's metadata"),
]


@pytest.mark.parametrize(("path", "target", "why"), LINKS_OUT)
def test_symlinks_leading_out_are_refused(
    tool_world: ToolWorld, resource: str, path: str, target: str, why: str
) -> None:
    before = tool_world.outside()
    outcome = run(tool_world, "local/symlink", resource, path=path, target=target)
    assert not outcome.ok
    assert why in outcome.output
    assert outcome.output.startswith("local/symlink: ")
    assert "\n" not in outcome.output
    assert outcome.writes == ()
    assert not exists(tool_world, resource, path)
    assert tool_world.sandboxes.modified() == set()
    assert tool_world.outside() == before


@pytest.mark.parametrize(
    ("source", "destination"),
    [
        ("docs", "../docs"),
        ("docs", "/tmp/docs"),
        ("../canary.txt", "stolen.txt"),
        (".git", "git"),
        ("docs", ".git/docs"),
        ("docs", "."),
    ],
)
def test_moves_out_of_or_into_forbidden_places_are_refused(
    tool_world: ToolWorld, source: str, destination: str
) -> None:
    before = tool_world.outside()
    for resource_id in (FILES, LAYERED):
        outcome = run(tool_world, "local/move", resource_id, **{"from": source, "to": destination})
        assert not outcome.ok, (resource_id, source, destination)
        assert "\n" not in outcome.output
        assert content(tool_world, resource_id, "docs/guide.md") == b"guide v1\n"
    assert tool_world.canary.read_text() == CANARY
    assert tool_world.outside() == before
    assert tool_world.sandboxes.modified() == set()


def test_a_move_that_would_carry_a_link_outside_is_refused(
    tool_world: ToolWorld, resource: str
) -> None:
    assert run(tool_world, "local/symlink", resource, path="a/b/l", target="../../x").ok
    for source, destination in (("a/b/l", "l"), ("a/b", "b")):
        outcome = run(tool_world, "local/move", resource, **{"from": source, "to": destination})
        assert not outcome.ok
        assert "points outside the sandbox" in outcome.output
    assert link_of(tool_world, resource, "a/b/l") == "../../x"
    deeper = run(tool_world, "local/move", resource, **{"from": "a/b", "to": "c/d/b"})
    assert deeper.ok, deeper.output  # deeper, the link still lands inside


@pytest.mark.parametrize("resource_id", [GIT, FILES, OUTBOX])
def test_a_parent_symlink_leading_out_is_not_moved_through(
    tool_world: ToolWorld, resource_id: str
) -> None:
    workdir = tool_world.workdir(resource_id)
    (workdir / "out").symlink_to(tool_world.tmp, target_is_directory=True)
    before = tool_world.outside()
    path = "notes.txt" if resource_id == OUTBOX else "docs" if resource_id == FILES else "README.md"
    for tool, arguments in (
        ("local/move", {"from": path, "to": "out/stolen"}),
        ("local/move", {"from": "out/canary.txt", "to": "mine.txt"}),
        ("local/delete", {"path": "out/canary.txt"}),
        ("local/mkdir", {"path": "out/new"}),
        ("local/symlink", {"path": "out/l", "target": "x"}),
        ("local/chmod", {"path": "out/canary.txt", "mode": "0600"}),
    ):
        outcome = run(tool_world, tool, resource_id, **arguments)
        assert not outcome.ok, (tool, outcome.output)
        assert "resolves outside the sandbox" in outcome.output
    assert tool_world.outside() == before
    assert tool_world.canary.read_text() == CANARY


def test_a_nested_repository_is_neither_moved_nor_deleted(tool_world: ToolWorld) -> None:
    nested = tool_world.workdir(FILES) / "vendor" / "lib"
    (nested / ".git").mkdir(parents=True)
    (nested / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    for tool, arguments in (
        ("local/delete", {"path": "vendor"}),
        ("local/move", {"from": "vendor", "to": "third_party"}),
    ):
        outcome = run(tool_world, tool, FILES, **arguments)
        assert not outcome.ok
        assert "vendor holds git metadata (vendor/lib/.git)" in outcome.output
    assert (nested / ".git" / "HEAD").is_file()


@pytest.mark.parametrize("resource_id", [DB, API])
def test_resources_without_files_are_refused(tool_world: ToolWorld, resource_id: str) -> None:
    for tool, extra in (
        ("local/move", {"from": "a", "to": "b"}),
        ("local/delete", {"path": "a"}),
        ("local/mkdir", {"path": "a"}),
        ("local/symlink", {"path": "a", "target": "b"}),
        ("local/chmod", {"path": "a", "mode": "0644"}),
    ):
        outcome = run(tool_world, tool, resource_id, **extra)
        assert not outcome.ok and "has no files" in outcome.output
    assert tool_world.sandboxes.modified() == set()


def test_strategize_is_read_only_for_the_tree_tools(tool_world: ToolWorld) -> None:
    for tool in ("local/move", "local/delete", "local/mkdir", "local/symlink", "local/chmod"):
        outcome = tool_world.call(tool, {"resource": FILES}, Phase.STRATEGIZE)
        assert not outcome.ok and outcome.output.startswith("Strategize is read-only")
    assert tool_world.sandboxes.modified() == set()


def test_the_overlay_log_holds_every_tree_change_for_another_process(
    tool_world: ToolWorld,
) -> None:
    sandbox = tool_world.sandboxes.get(LAYERED)
    assert isinstance(sandbox, OverlaySandbox)
    for tool, arguments in (
        ("local/write-file", {"path": "b.bin", "content": "AAEC/w==", "encoding": "base64"}),
        ("local/move", {"from": "docs", "to": "manual/docs"}),
        ("local/mkdir", {"path": "empty", "mode": "0700"}),
        ("local/symlink", {"path": "guide", "target": "manual/docs/guide.md"}),
        ("local/chmod", {"path": "manual/docs/deep/logo.bin", "mode": "0600"}),
    ):
        assert run(tool_world, tool, LAYERED, **arguments).ok, tool

    def tree(overlay: OverlaySandbox) -> list[tuple[str, str, int]]:
        return [(e.path, e.kind, e.mode) for e in overlay.walk()]

    expected = tree(sandbox)
    assert ("manual/docs/deep/logo.bin", "file", 0o600) in expected
    assert ("empty", "directory", 0o700) in expected
    assert not sandbox.exists("docs")
    strategy = OverlayStrategy()
    resource, plan_id = sandbox.resource, tool_world.plan.plan_id
    assert tree(strategy.open(resource, plan_id, sandbox.home)) == expected  # from the log
    sandbox.checkpoint()
    reopened = strategy.open(resource, plan_id, sandbox.home)  # from the sealed layer
    assert tree(reopened) == expected
    assert reopened.read_bytes("b.bin") == b"\x00\x01\x02\xff"
    assert reopened.read_link("guide") == "manual/docs/guide.md"
    assert reopened.read_bytes("manual/docs/deep/logo.bin") == bytes(range(256)) * 8
