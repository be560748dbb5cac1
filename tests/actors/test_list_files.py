"""`local/list-files`: what a resource's sandbox holds, as an agent explores a project it
has not seen — the paths as the sandbox has them (git's metadata left out), folders first
level by level, never through a symlink, at most ``LISTED`` entries."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cleveragents_tui.actors.file_tools import LISTED
from cleveragents_tui.sandbox.overlay import OverlaySandbox
from tests.actors.conftest import DB, FILES, GIT, LAYERED, OUTBOX, ToolWorld

WITH_FILES = [GIT, FILES, LAYERED, OUTBOX]


def _listed(output: str) -> list[str]:
    """The paths a listing names (its header and any note left out)."""
    return [line.split("  ")[0] for line in output.splitlines()[1:] if not line.startswith("…")]


def _tree(world: ToolWorld, resource_id: str) -> list[str]:
    """Every path the sandbox holds, read directly (folders ending with /)."""
    sandbox = world.sandboxes.get(resource_id)
    if isinstance(sandbox, OverlaySandbox):
        return sorted(e.path + ("/" if e.kind.value == "directory" else "") for e in sandbox.walk())
    top = world.workdir(resource_id)
    found = []
    for folder, folders, files in os.walk(top):
        folders[:] = [f for f in folders if f != ".git"]
        where = Path(folder).relative_to(top)
        for name in folders:
            found.append(f"{(where / name).as_posix()}/")
        found += [(where / name).as_posix() for name in files if name != ".git"]
    return sorted(found)


@pytest.mark.parametrize("resource_id", WITH_FILES)
def test_a_listing_names_every_path_the_sandbox_holds(
    tool_world: ToolWorld, resource_id: str
) -> None:
    outcome = tool_world.call("local/list-files", {"resource": resource_id})

    assert outcome.ok, outcome.output
    assert outcome.writes == ()
    listed = _listed(outcome.output)
    assert sorted(p.removesuffix("/") + ("/" if p.endswith("/") else "") for p in listed) == (
        _tree(tool_world, resource_id)
    )
    assert not any(".git" in p.split("/") for p in listed)
    assert outcome.output.splitlines()[0] == (
        f"{len(listed)} entries in the resource (folders end with /):"
    )


@pytest.mark.parametrize("resource_id", [FILES, LAYERED])
def test_a_folder_is_listed_alone_and_what_is_not_a_folder_is_refused(
    tool_world: ToolWorld, resource_id: str
) -> None:
    written = tool_world.call(
        "local/write-file", {"resource": resource_id, "path": "docs/new.md", "content": "new\n"}
    )
    assert written.ok
    docs = tool_world.call("local/list-files", {"resource": resource_id, "path": "docs"})
    assert docs.ok, docs.output
    assert "docs/new.md  4 bytes" in docs.output.splitlines()  # the sandbox's, just written
    assert all(p.startswith("docs/") for p in _listed(docs.output))
    assert docs.output.startswith("4 entries under docs (folders end with /):")  # deep/, its file

    for path, said in (
        ("docs/guide.md", "docs/guide.md is a file, not a folder"),
        ("no/such", "no/such does not exist"),
        ("../", "leaves the sandbox"),
        (".git", "metadata"),
    ):
        refused = tool_world.call("local/list-files", {"resource": resource_id, "path": path})
        assert not refused.ok and said in refused.output, (path, refused.output)


@pytest.mark.parametrize("resource_id", [FILES, GIT])
def test_a_symlink_is_listed_never_followed(tool_world: ToolWorld, resource_id: str) -> None:
    workdir = tool_world.workdir(resource_id)
    (workdir / "out").symlink_to(tool_world.tmp, target_is_directory=True)

    listing = tool_world.call("local/list-files", {"resource": resource_id}).output

    assert "out  (symlink)" in listing.splitlines()
    assert not any(p.startswith("out/") for p in _listed(listing))
    assert "canary.txt" not in listing


@pytest.mark.parametrize("resource_id", [FILES, LAYERED])
def test_a_large_tree_shows_its_top_levels_first_and_says_there_is_more(
    tool_world: ToolWorld, resource_id: str
) -> None:
    for path in [*(f"a/b/f{n:04}.txt" for n in range(LISTED + 10)), "top.txt"]:
        made = tool_world.call(
            "local/write-file", {"resource": resource_id, "path": path, "content": "x"}
        )
        assert made.ok, made.output

    outcome = tool_world.call("local/list-files", {"resource": resource_id})

    listed = _listed(outcome.output)
    assert len(listed) == LISTED
    assert {"top.txt", "a/", "a/b/", "docs/"} <= set(listed)  # the top levels are there
    assert outcome.output.splitlines()[-1].startswith("… more not listed: list a folder")
    inside = tool_world.call("local/list-files", {"resource": resource_id, "path": "a/b"})
    assert len(_listed(inside.output)) == LISTED  # that folder alone is still past the cap


def test_a_database_has_no_files_to_list(tool_world: ToolWorld) -> None:
    refused = tool_world.call("local/list-files", {"resource": DB})
    assert not refused.ok
    assert "has no files" in refused.output
