"""The file tools on real sandboxes of every strategy that has files, and their refusals."""

from __future__ import annotations

import os
import stat
from typing import Any

import pytest

from cleveragents_tui.sandbox.overlay import OverlaySandbox
from tests.actors.conftest import API, CANARY, DB, FILES, GIT, LAYERED, OUTBOX, ToolWorld

# A resource with files, and one file it starts with.
WITH_FILES = {
    GIT: ("README.md", "# demo\n"),
    FILES: ("docs/guide.md", "guide v1\n"),
    LAYERED: ("docs/guide.md", "guide v1\n"),
    OUTBOX: ("notes.txt", "real folder, no sandbox\n"),
}
WORKDIRS = [GIT, FILES, OUTBOX]


def content(world: ToolWorld, resource_id: str, path: str) -> bytes | None:
    """What the sandbox holds at ``path``, read directly (not through the tools)."""
    sandbox = world.sandboxes.get(resource_id)
    if isinstance(sandbox, OverlaySandbox):
        return sandbox.read_bytes(path) if sandbox.exists(path) else None
    target = world.workdir(resource_id) / path
    return target.read_bytes() if target.exists() else None


def mode(world: ToolWorld, resource_id: str, path: str) -> int:
    sandbox = world.sandboxes.get(resource_id)
    if isinstance(sandbox, OverlaySandbox):
        entry = sandbox.stat(path)
        assert entry is not None
        return entry.mode
    return stat.S_IMODE(os.stat(world.workdir(resource_id) / path).st_mode)


@pytest.fixture(params=sorted(WITH_FILES))
def resource(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_read_file(tool_world: ToolWorld, resource: str) -> None:
    path, text = WITH_FILES[resource]
    outcome = tool_world.call("local/read-file", {"resource": resource, "path": path})
    assert outcome.ok
    assert outcome.output == text
    assert outcome.writes == ()
    missing = tool_world.call("local/read-file", {"resource": resource, "path": "no/such.txt"})
    assert not missing.ok
    assert "no/such.txt does not exist" in missing.output
    folder = tool_world.call("local/read-file", {"resource": resource, "path": "."})
    assert not folder.ok
    assert tool_world.sandboxes.modified() == set()


@pytest.mark.parametrize("resource_id", [FILES, LAYERED])
def test_read_file_says_when_binary(tool_world: ToolWorld, resource_id: str) -> None:
    outcome = tool_world.call(
        "local/read-file", {"resource": resource_id, "path": "docs/deep/logo.bin"}
    )
    assert outcome.ok
    assert outcome.output.startswith("[binary file: 2048 bytes, shown as UTF-8")
    assert "\ufffd" in outcome.output


def test_read_file_truncates_past_64_kib(tool_world: ToolWorld, resource: str) -> None:
    big = "é" * 40_000  # 80,000 bytes; the 64 KiB cut falls inside a two-byte character
    assert tool_world.call(
        "local/write-file", {"resource": resource, "path": "big.txt", "content": big}
    ).ok
    outcome = tool_world.call("local/read-file", {"resource": resource, "path": "big.txt"})
    assert outcome.ok
    text, note = outcome.output.rsplit("\n", 1)
    assert text == "é" * 32_768
    assert note == "[truncated: showing the first 65536 of 80000 bytes]"
    assert "binary" not in outcome.output


def test_write_file_creates_folders_and_overwrites(tool_world: ToolWorld, resource: str) -> None:
    arguments = {"resource": resource, "path": "new/deep/file.txt", "content": "one\n"}
    outcome = tool_world.call("local/write-file", arguments)
    assert outcome.ok, outcome.output
    assert outcome.output == "created new/deep/file.txt: 4 bytes"
    assert outcome.writes == (resource,)
    assert content(tool_world, resource, "new/deep/file.txt") == b"one\n"
    assert mode(tool_world, resource, "new/deep/file.txt") == 0o644
    again = tool_world.call("local/write-file", {**arguments, "content": "two\n"})
    assert again.output == "wrote new/deep/file.txt: 4 bytes"
    assert content(tool_world, resource, "new/deep/file.txt") == b"two\n"
    empty = tool_world.call("local/write-file", {**arguments, "content": ""})
    assert empty.ok
    assert content(tool_world, resource, "new/deep/file.txt") == b""
    assert tool_world.sandboxes.modified() == {resource}


def test_write_file_executable_flag(tool_world: ToolWorld, resource: str) -> None:
    script = {"resource": resource, "path": "bin/run.sh", "content": "#!/bin/sh\n"}
    assert tool_world.call("local/write-file", {**script, "executable": True}).ok
    assert mode(tool_world, resource, "bin/run.sh") == 0o755
    assert tool_world.call("local/write-file", {**script, "content": "#!/bin/sh\ntrue\n"}).ok
    assert mode(tool_world, resource, "bin/run.sh") == 0o755  # omitted: the mode is kept
    assert tool_world.call("local/write-file", {**script, "executable": False}).ok
    assert mode(tool_world, resource, "bin/run.sh") == 0o644


def test_write_file_refuses_a_folder(tool_world: ToolWorld, resource: str) -> None:
    assert tool_world.call(
        "local/write-file", {"resource": resource, "path": "sub/file.txt", "content": "x"}
    ).ok
    outcome = tool_world.call(
        "local/write-file", {"resource": resource, "path": "sub", "content": "x"}
    )
    assert not outcome.ok
    assert "sub is a folder" in outcome.output
    below_file = tool_world.call(
        "local/write-file", {"resource": resource, "path": "sub/file.txt/x", "content": "x"}
    )
    assert not below_file.ok
    assert "not a folder" in below_file.output
    assert content(tool_world, resource, "sub/file.txt") == b"x"


def test_edit_file_replaces_exactly_one_occurrence(tool_world: ToolWorld, resource: str) -> None:
    text = "alpha\nbeta\nbeta\ngamma\n"
    base = {"resource": resource, "path": "edit.txt"}
    assert tool_world.call("local/write-file", {**base, "content": text, "executable": True}).ok

    outcome = tool_world.call("local/edit-file", {**base, "old": "gamma", "new": "delta"})
    assert outcome.ok, outcome.output
    assert outcome.output == "edited edit.txt: replaced 1 occurrence at line 4"
    assert outcome.writes == (resource,)
    assert content(tool_world, resource, "edit.txt") == b"alpha\nbeta\nbeta\ndelta\n"
    assert mode(tool_world, resource, "edit.txt") == 0o755

    several = tool_world.call("local/edit-file", {**base, "old": "beta", "new": "x"})
    assert not several.ok
    assert several.output == (
        "local/edit-file: the old text was found 2 times in edit.txt; nothing changed "
        "(give a text that occurs exactly once, with more context if needed)"
    )
    assert several.writes == ()
    none = tool_world.call("local/edit-file", {**base, "old": "omega", "new": "x"})
    assert not none.ok
    assert "the old text was not found in edit.txt; nothing changed" in none.output
    assert content(tool_world, resource, "edit.txt") == b"alpha\nbeta\nbeta\ndelta\n"

    unique = tool_world.call("local/edit-file", {**base, "old": "beta\ndelta", "new": ""})
    assert unique.ok
    assert content(tool_world, resource, "edit.txt") == b"alpha\nbeta\n\n"


def test_an_edit_already_made_succeeds_and_changes_nothing(
    tool_world: ToolWorld, resource: str
) -> None:
    """A retry after a crash between the write and its record, or an append on a state with
    the same edit, must not fail the step."""
    base = {"resource": resource, "path": "edit.txt"}
    assert tool_world.call("local/write-file", {**base, "content": "a = 1\nb = 2\n"}).ok
    edit = {**base, "old": "a = 1", "new": "z = 9"}
    assert tool_world.call("local/edit-file", edit).ok
    again = tool_world.call("local/edit-file", edit)
    assert again.ok, again.output
    assert again.output == "edit.txt already has the new text; nothing changed"
    assert content(tool_world, resource, "edit.txt") == b"z = 9\nb = 2\n"
    neither = tool_world.call("local/edit-file", {**base, "old": "a = 1", "new": "c = 3"})
    assert not neither.ok and "not found" in neither.output


def test_edit_file_refusals_change_nothing(tool_world: ToolWorld) -> None:
    binary = tool_world.call(
        "local/edit-file",
        {"resource": FILES, "path": "docs/deep/logo.bin", "old": "a", "new": "b"},
    )
    assert not binary.ok
    assert "not UTF-8 text" in binary.output
    missing = tool_world.call(
        "local/edit-file", {"resource": FILES, "path": "nope.txt", "old": "a", "new": "b"}
    )
    assert not missing.ok
    assert "nope.txt does not exist" in missing.output
    assert tool_world.sandboxes.modified() == set()


def test_delete_file(tool_world: ToolWorld, resource: str) -> None:
    path, _ = WITH_FILES[resource]
    outcome = tool_world.call("local/delete-file", {"resource": resource, "path": path})
    assert outcome.ok
    assert outcome.output == f"deleted {path}"
    assert outcome.writes == (resource,)
    assert content(tool_world, resource, path) is None
    again = tool_world.call("local/delete-file", {"resource": resource, "path": path})
    assert not again.ok
    assert f"{path} does not exist" in again.output
    assert tool_world.sandboxes.modified() == {resource}


def test_delete_file_refuses_a_folder(tool_world: ToolWorld) -> None:
    for resource_id in (FILES, LAYERED):
        outcome = tool_world.call("local/delete-file", {"resource": resource_id, "path": "docs"})
        assert not outcome.ok
        assert "docs is a folder; local/delete-file removes files only" in outcome.output
        assert content(tool_world, resource_id, "docs/guide.md") == b"guide v1\n"
    assert tool_world.sandboxes.modified() == set()


def test_real_resources_stay_untouched_by_sandboxed_writes(tool_world: ToolWorld) -> None:
    before = tool_world.outside()
    for resource_id in (GIT, FILES, LAYERED):
        path, _ = WITH_FILES[resource_id]
        assert tool_world.call(
            "local/write-file", {"resource": resource_id, "path": path, "content": "changed\n"}
        ).ok
        assert tool_world.call("local/delete-file", {"resource": resource_id, "path": path}).ok
    assert tool_world.outside() == before


@pytest.mark.parametrize("resource_id", [DB, API])
def test_resources_without_files_are_refused(tool_world: ToolWorld, resource_id: str) -> None:
    for tool, extra in (
        ("local/read-file", {}),
        ("local/write-file", {"content": "x"}),
        ("local/edit-file", {"old": "a", "new": "b"}),
        ("local/delete-file", {}),
    ):
        outcome = tool_world.call(tool, {"resource": resource_id, "path": "a.txt", **extra})
        assert not outcome.ok
        assert f"resource {resource_id}" in outcome.output
        assert "has no files" in outcome.output
    assert tool_world.sandboxes.modified() == set()


ESCAPES = [
    "../canary.txt",
    "../../canary.txt",
    "docs/../../canary.txt",
    "/etc/passwd",
    "~/canary.txt",
    "..\\canary.txt",
    ".git/config",
    ".git",
    "docs/.git/hooks/pre-commit",
    "a\x00b",
    ".",
]


def _calls(resource_id: str, path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("local/read-file", {"resource": resource_id, "path": path}),
        ("local/write-file", {"resource": resource_id, "path": path, "content": "pwned\n"}),
        ("local/edit-file", {"resource": resource_id, "path": path, "old": "c", "new": "X"}),
        ("local/delete-file", {"resource": resource_id, "path": path}),
    ]


@pytest.mark.parametrize("path", ESCAPES)
def test_paths_that_leave_the_sandbox_are_refused(
    tool_world: ToolWorld, resource: str, path: str
) -> None:
    before = tool_world.outside()
    for tool, arguments in _calls(resource, path):
        outcome = tool_world.call(tool, arguments)
        assert not outcome.ok, (tool, path)
        assert "\n" not in outcome.output
        assert outcome.writes == ()
    absolute = str(tool_world.canary)
    for tool, arguments in _calls(resource, absolute):
        assert not tool_world.call(tool, arguments).ok
    assert tool_world.canary.read_text() == CANARY
    assert tool_world.outside() == before
    assert tool_world.sandboxes.modified() == set()


@pytest.mark.parametrize("resource_id", WORKDIRS)
def test_symlinks_leading_out_are_not_followed(tool_world: ToolWorld, resource_id: str) -> None:
    workdir = tool_world.workdir(resource_id)
    (workdir / "out").symlink_to(tool_world.tmp, target_is_directory=True)
    (workdir / "canary-link").symlink_to(tool_world.canary)
    before = tool_world.outside()

    for path in ("out/canary.txt", "out/new.txt", "canary-link"):
        for tool, arguments in _calls(resource_id, path)[:3]:
            outcome = tool_world.call(tool, arguments)
            assert not outcome.ok, (tool, path)
            assert outcome.writes == ()
    refused = tool_world.call("local/read-file", {"resource": resource_id, "path": "canary-link"})
    assert "symlink leading outside the sandbox" in refused.output
    write = tool_world.call(
        "local/write-file", {"resource": resource_id, "path": "canary-link", "content": "x"}
    )
    assert "canary-link is a symlink" in write.output
    assert tool_world.sandboxes.modified() == set()

    # Deleting removes the link itself, never what it points to.
    unlink = tool_world.call("local/delete-file", {"resource": resource_id, "path": "canary-link"})
    assert unlink.ok
    assert not (workdir / "canary-link").is_symlink()
    assert tool_world.canary.read_text() == CANARY
    assert tool_world.outside() == before


@pytest.mark.parametrize("resource_id", [*WORKDIRS, LAYERED])
def test_symlinks_inside_the_sandbox_are_read(tool_world: ToolWorld, resource_id: str) -> None:
    path, text = WITH_FILES[resource_id]
    sandbox = tool_world.sandboxes.get(resource_id)
    target = os.path.relpath(path, "links")
    if isinstance(sandbox, OverlaySandbox):
        sandbox.symlink("links/alias", target)
    else:
        (tool_world.workdir(resource_id) / "links").mkdir()
        (tool_world.workdir(resource_id) / "links" / "alias").symlink_to(target)
    outcome = tool_world.call("local/read-file", {"resource": resource_id, "path": "links/alias"})
    assert outcome.ok, outcome.output
    assert outcome.output == text


@pytest.mark.parametrize("resource_id", WORKDIRS)
def test_a_hard_link_to_a_file_outside_is_not_written_through(
    tool_world: ToolWorld, resource_id: str
) -> None:
    workdir = tool_world.workdir(resource_id)
    os.link(tool_world.canary, workdir / "hard.txt")
    write = tool_world.call(
        "local/write-file", {"resource": resource_id, "path": "hard.txt", "content": "new\n"}
    )
    assert write.ok, write.output
    assert (workdir / "hard.txt").read_text() == "new\n"
    os.unlink(workdir / "hard.txt")
    os.link(tool_world.canary, workdir / "hard.txt")
    edit = tool_world.call(
        "local/edit-file",
        {"resource": resource_id, "path": "hard.txt", "old": "never", "new": "always"},
    )
    assert edit.ok, edit.output
    assert (workdir / "hard.txt").read_text() == "canary: must always change\n"
    assert tool_world.canary.read_text() == CANARY
    assert not [p for p in workdir.iterdir() if p.name.startswith(".cleveragents-write-")]


@pytest.mark.parametrize("resource_id", WORKDIRS)
def test_special_files_are_neither_read_nor_written(
    tool_world: ToolWorld, resource_id: str
) -> None:
    os.mkfifo(tool_world.workdir(resource_id) / "pipe")
    read = tool_world.call("local/read-file", {"resource": resource_id, "path": "pipe"})
    assert not read.ok
    assert "pipe is a special file, not a regular file" in read.output
    write = tool_world.call(
        "local/write-file", {"resource": resource_id, "path": "pipe", "content": "x"}
    )
    assert not write.ok
    assert "pipe is a special file, not a regular file" in write.output
    assert tool_world.sandboxes.modified() == set()
