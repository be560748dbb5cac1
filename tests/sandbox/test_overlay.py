"""The overlay sandbox: copy-on-write layers over a real directory in tmp_path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    Change,
    ChangeKind,
    CheckpointMissingError,
    Sandbox,
    SandboxError,
)
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.overlay import EntryKind, OverlaySandbox, OverlayStrategy
from cleveragents_tui.sandbox.safety import UnsafeInputError
from tests.sandbox.test_filesystem_copy import Canary, build_tree, tree_state

State = dict[str, tuple[object, ...]]


def view_state(sandbox: OverlaySandbox) -> State:
    """The merged view as tools see it: kinds, modes, bytes, link targets."""
    state: State = {}
    for entry in sandbox.walk():
        if entry.kind is EntryKind.FILE:
            state[entry.path] = ("file", entry.mode, sandbox.read_bytes(entry.path))
        elif entry.kind is EntryKind.DIRECTORY:
            state[entry.path] = ("dir", entry.mode)
        else:
            state[entry.path] = ("link", sandbox.read_link(entry.path))
    return state


def disk_state(root: Path) -> State:
    """``tree_state`` without file mtimes (the overlay does not keep them)."""
    return {path: value[:3] for path, value in tree_state(root).items()}


def overlay_resource(location: Path) -> Resource:
    return Resource(
        resource_id="local/files",
        kind="filesystem",
        location=str(location),
        sandbox_strategy="overlay",
    )


@pytest.fixture
def real(tmp_path: Path) -> Path:
    root = tmp_path / "real"
    root.mkdir()
    build_tree(root)
    return root


@pytest.fixture
def plan_id() -> str:
    return new_ulid()


@pytest.fixture
def sandbox(real: Path, tmp_path: Path, plan_id: str) -> OverlaySandbox:
    return OverlayStrategy(durable=False).create(
        overlay_resource(real), plan_id, tmp_path / "sandboxes"
    )


def mess_up(sandbox: OverlaySandbox) -> None:
    """Modify, add, delete, chmod, and replace a folder and a file by each other."""
    sandbox.write_bytes("README.md", b"changed\n")
    sandbox.write_bytes("added/inner/x.bin", b"\x01\x02", mode=0o600)
    sandbox.delete("docs/guide.txt")
    sandbox.chmod("run.sh", 0o600)
    sandbox.delete("empty-dir")
    sandbox.make_dirs("new-empty")
    sandbox.delete("src/pkg")
    sandbox.write_bytes("src/pkg", b"a file now")
    sandbox.delete("src/main.py")
    sandbox.write_bytes("src/main.py/now-a-dir", b"surprise")


# --- the file operations -----------------------------------------------------------------------


def test_a_new_sandbox_shows_the_real_directory(sandbox: OverlaySandbox, real: Path) -> None:
    assert isinstance(sandbox, Sandbox)
    assert sandbox.workdir is None
    assert view_state(sandbox) == disk_state(real)
    assert sandbox.changes_since_baseline() == []
    assert sandbox.read_bytes("src/pkg/deep/data.bin") == bytes(range(256)) * 40
    assert sandbox.list_dir() == sorted(os.listdir(real))


def test_writes_never_reach_the_real_directory(sandbox: OverlaySandbox, real: Path) -> None:
    before = tree_state(real)
    mess_up(sandbox)
    assert tree_state(real) == before
    assert sandbox.read_bytes("README.md") == b"changed\n"
    assert not sandbox.exists("docs/guide.txt")
    assert sandbox.list_dir("docs") == []
    assert sandbox.list_dir("src") == ["main.py", "pkg"]
    assert sandbox.list_dir("src/main.py") == ["now-a-dir"]
    assert sandbox.read_bytes("src/pkg") == b"a file now"
    stat_run = sandbox.stat("run.sh")
    assert stat_run is not None and stat_run.mode == 0o600
    added = sandbox.stat("added/inner/x.bin")
    assert added is not None and (added.kind, added.mode, added.size) == (EntryKind.FILE, 0o600, 2)
    assert sandbox.stat("added") is not None and sandbox.stat("nope") is None


def test_a_folder_deleted_then_recreated_hides_what_was_below(sandbox: OverlaySandbox) -> None:
    sandbox.delete("src")
    sandbox.write_bytes("src/fresh.py", b"fresh")
    assert sandbox.list_dir("src") == ["fresh.py"]
    assert not sandbox.exists("src/pkg/__init__.py")
    ref = sandbox.checkpoint()
    sandbox.write_bytes("later.txt", b"later")
    sandbox.rollback(ref)
    assert sandbox.walk("src")[0].path == "src/fresh.py"
    assert len(sandbox.walk("src")) == 1


def test_write_keeps_the_mode_and_chmod_copies_up(sandbox: OverlaySandbox, real: Path) -> None:
    sandbox.write_bytes("run.sh", b"#!/bin/sh\necho new\n")
    entry = sandbox.stat("run.sh")
    assert entry is not None and entry.mode == 0o755
    sandbox.chmod("README.md", 0o600)
    assert sandbox.read_bytes("README.md") == b"hello\n"
    (real / "README.md").write_text("changed underneath\n")  # the copy-up kept our bytes
    assert sandbox.read_bytes("README.md") == b"hello\n"
    sandbox.chmod("docs", 0o700)
    docs = sandbox.stat("docs")
    assert docs is not None and docs.mode == 0o700
    assert sandbox.list_dir("docs") == ["guide.txt"]


def test_file_operations_refuse_what_they_should(sandbox: OverlaySandbox) -> None:
    with pytest.raises(FileNotFoundError):
        sandbox.read_bytes("missing.txt")
    with pytest.raises(FileNotFoundError):
        sandbox.delete("missing.txt")
    with pytest.raises(IsADirectoryError):
        sandbox.read_bytes("src")
    with pytest.raises(IsADirectoryError):
        sandbox.write_bytes("src", b"x")
    with pytest.raises(NotADirectoryError):
        sandbox.write_bytes("README.md/below", b"x")
    with pytest.raises(NotADirectoryError):
        sandbox.list_dir("README.md")
    with pytest.raises(FileExistsError):
        sandbox.make_dirs("README.md")
    with pytest.raises(FileExistsError):
        sandbox.symlink("README.md", "src")
    with pytest.raises(SandboxError, match="mode"):
        sandbox.write_bytes("x", b"x", mode=0o4755)
    for bad in ("../escape", "/etc/passwd", "a/../../b", "a\x00b", ".git/config", ""):
        with pytest.raises(UnsafeInputError):
            sandbox.write_bytes(bad, b"x")
    with pytest.raises(UnsafeInputError):
        sandbox.symlink("out", "../..")
    with pytest.raises(SandboxError, match="not a regular file"):
        sandbox.read_bytes("main-link")
    assert sandbox.read_link("main-link") == "src/main.py"


def test_links_in_the_real_directory_are_never_followed(
    real: Path, tmp_path: Path, plan_id: str
) -> None:
    canary = Canary(tmp_path / "outside")
    os.symlink(canary.root / "etc", real / "etc")
    sandbox = OverlayStrategy(durable=False).create(overlay_resource(real), plan_id, tmp_path / "s")
    assert sandbox.stat("etc") is not None
    assert not sandbox.exists("etc/passwd")
    with pytest.raises(NotADirectoryError):
        sandbox.write_bytes("etc/passwd", b"owned")
    sandbox.delete("etc")
    sandbox.write_bytes("etc/passwd", b"ours")
    sandbox.apply()
    assert (real / "etc").is_dir() and not (real / "etc").is_symlink()
    assert (real / "etc" / "passwd").read_bytes() == b"ours"
    assert canary.unchanged()


# --- checkpoints -------------------------------------------------------------------------------


def test_checkpoint_change_rollback(sandbox: OverlaySandbox) -> None:
    ref = sandbox.checkpoint()
    expected = view_state(sandbox)
    mess_up(sandbox)
    assert view_state(sandbox) != expected
    sandbox.rollback(ref)
    assert view_state(sandbox) == expected
    sandbox.verify(ref)


def test_rollback_several_checkpoints_at_once(sandbox: OverlaySandbox) -> None:
    refs, states = [], []
    for step in range(5):
        sandbox.write_bytes(f"step{step}.txt", f"step {step}\n".encode())
        sandbox.write_bytes("README.md", f"readme {step}\n".encode())
        if step == 2:
            sandbox.delete("docs")
        refs.append(sandbox.checkpoint())
        states.append(view_state(sandbox))
    sandbox.rollback(refs[3])
    assert view_state(sandbox) == states[3]
    sandbox.rollback(refs[0])
    assert view_state(sandbox) == states[0]
    assert sandbox.checkpoints() == [refs[0]]
    sandbox.drop_checkpoint(refs[3])
    with pytest.raises(CheckpointMissingError):
        sandbox.rollback(refs[3])
    sandbox.write_bytes("after.txt", b"after")
    new = sandbox.checkpoint()
    assert new not in refs
    assert sandbox.diff(refs[0], new) == [Change("after.txt", ChangeKind.ADDED)]


def test_checkpoints_rolled_back_past_are_kept(sandbox: OverlaySandbox) -> None:
    """As git_worktree and filesystem_copy keep theirs: a correction's diff reads the attempt
    it replaced, a restore goes back to it, the budget drops it — also after a reopen."""
    base = sandbox.checkpoint()
    mess_up(sandbox)
    sandbox.move("added", "moved")
    sandbox.symlink("link", "README.md")
    sandbox.make_dirs("empty")
    old = sandbox.checkpoint()
    old_state = view_state(sandbox)
    sandbox.rollback(base)
    sandbox.write_bytes("README.md", b"new attempt\n")
    new = sandbox.checkpoint()
    reopened = OverlayStrategy(durable=False).open(
        sandbox.resource, sandbox_plan(sandbox), sandbox_root(sandbox)
    )
    for each in (sandbox, reopened):
        assert each.read(old, "README.md") == b"changed\n"
        assert each.read(old, "link") == b"README.md"
        changed = {c.path for c in each.diff(old, new)}
        assert {"README.md", "moved", "link", "empty", "run.sh"} <= changed
        each.verify(old)
    reopened.rollback(old)  # back to the old attempt (a restore after a failed rollback)
    assert view_state(reopened) == old_state
    assert reopened.read(new, "README.md") == b"new attempt\n"  # the new one is kept now
    reopened.rollback(new)
    reopened.drop_checkpoint(old)
    with pytest.raises(CheckpointMissingError):
        reopened.read(old, "README.md")
    assert reopened.read_bytes("README.md") == b"new attempt\n"
    reopened.apply()  # the real directory changed: nothing kept reads it as it was
    with pytest.raises(CheckpointMissingError):
        reopened.read(new, "README.md")


def test_diff_and_read(sandbox: OverlaySandbox) -> None:
    first = sandbox.checkpoint()
    mess_up(sandbox)
    second = sandbox.checkpoint()
    assert sandbox.diff(first, second) == [
        Change("README.md", ChangeKind.MODIFIED),
        Change("added", ChangeKind.ADDED),
        Change("added/inner", ChangeKind.ADDED),
        Change("added/inner/x.bin", ChangeKind.ADDED),
        Change("docs/guide.txt", ChangeKind.DELETED),
        Change("empty-dir", ChangeKind.DELETED),
        Change("new-empty", ChangeKind.ADDED),
        Change("run.sh", ChangeKind.MODIFIED),
        Change("src/main.py", ChangeKind.MODIFIED),
        Change("src/main.py/now-a-dir", ChangeKind.ADDED),
        Change("src/pkg", ChangeKind.MODIFIED),
        Change("src/pkg/__init__.py", ChangeKind.DELETED),
        Change("src/pkg/deep", ChangeKind.DELETED),
        Change("src/pkg/deep/data.bin", ChangeKind.DELETED),
        Change("src/pkg/readonly.cfg", ChangeKind.DELETED),
    ]
    assert sandbox.read(first, "README.md") == b"hello\n"
    assert sandbox.read(second, "README.md") == b"changed\n"
    assert sandbox.read(second, "docs/guide.txt") is None
    assert sandbox.read(first, "src") is None
    assert sandbox.read(first, "main-link") == b"src/main.py"
    with pytest.raises(UnsafeInputError):
        sandbox.read(first, "../x")


def test_changes_since_baseline_compares_content(sandbox: OverlaySandbox) -> None:
    sandbox.write_bytes("README.md", b"hello\n")  # the same bytes: no change
    sandbox.write_bytes("docs/guide.txt", b"new guide")
    sandbox.delete("empty-dir")
    assert sandbox.changes_since_baseline() == [
        Change("docs/guide.txt", ChangeKind.MODIFIED),
        Change("empty-dir", ChangeKind.DELETED),
    ]


def test_drop_checkpoint_keeps_every_other_state(sandbox: OverlaySandbox) -> None:
    refs = []
    for step in range(4):
        sandbox.write_bytes(f"f{step}.txt", str(step).encode())
        sandbox.write_bytes("README.md", f"v{step}\n".encode())
        if step == 1:
            sandbox.delete("docs")
        if step == 2:
            sandbox.write_bytes("docs/back.txt", b"back")
        refs.append(sandbox.checkpoint())
    sandbox.write_bytes("uncommitted.txt", b"top")
    top = view_state(sandbox)
    paths = ["README.md", "f0.txt", "f2.txt", "docs/guide.txt", "docs/back.txt"]
    reads = {ref: [sandbox.read(ref, p) for p in paths] for ref in refs}
    diffs = {ref: sandbox.diff(refs[0], ref) for ref in refs}
    sandbox.drop_checkpoint(refs[1])
    sandbox.drop_checkpoint(refs[3])  # merges into the open top layer
    kept = [refs[0], refs[2]]
    assert sandbox.checkpoints() == kept
    for ref in kept:
        sandbox.verify(ref)
        assert [sandbox.read(ref, p) for p in paths] == reads[ref]
        assert sandbox.diff(refs[0], ref) == diffs[ref]
    assert view_state(sandbox) == top
    reopened = OverlayStrategy(durable=False).open(
        sandbox.resource, sandbox_plan(sandbox), sandbox_root(sandbox)
    )
    assert view_state(reopened) == top
    reopened.rollback(refs[2])
    assert reopened.read_bytes("README.md") == b"v2\n"
    assert reopened.read_bytes("docs/back.txt") == b"back"
    with pytest.raises(CheckpointMissingError):
        reopened.verify(refs[1])


def sandbox_home(sandbox: OverlaySandbox) -> Path:
    return sandbox.home


def sandbox_root(sandbox: OverlaySandbox) -> Path:
    return sandbox.home


def sandbox_plan(sandbox: OverlaySandbox) -> str:
    return str(json.loads((sandbox.home / "sandbox.json").read_text())["plan_id"])


def test_reopen_replays_the_open_layer(sandbox: OverlaySandbox) -> None:
    first = sandbox.checkpoint()
    mess_up(sandbox)
    expected = view_state(sandbox)
    top = sorted((sandbox_home(sandbox) / "layers").iterdir())[-1]
    with open(top / "log", "ab") as log:
        log.write(b'["f","cut-short.txt",420,1,')  # a crash in the middle of a record
    reopened = OverlayStrategy(durable=False).open(
        sandbox.resource, sandbox_plan(sandbox), sandbox_root(sandbox)
    )
    assert view_state(reopened) == expected
    assert reopened.checkpoints() == [first]
    reopened.rollback(first)
    assert reopened.read_bytes("README.md") == b"hello\n"


def test_verify_detects_damage(sandbox: OverlaySandbox) -> None:
    sandbox.write_bytes("precious.txt", b"precious")
    ref = sandbox.checkpoint()
    sandbox.verify(ref)
    objects = sandbox_home(sandbox) / "objects"
    store = ObjectStore(objects, durable=False)
    oid = store.put_bytes(b"precious")
    (objects / oid[:2] / oid[2:]).unlink()
    fresh = OverlayStrategy(durable=False).open(
        sandbox.resource, sandbox_plan(sandbox), sandbox_root(sandbox)
    )
    with pytest.raises(CheckpointMissingError):
        fresh.verify(ref)
    with pytest.raises(CheckpointMissingError):
        fresh.rollback(ref)
    with pytest.raises(CheckpointMissingError):
        fresh.verify("000000-00000000")


# --- apply and discard -------------------------------------------------------------------------


def test_apply_writes_the_merged_result(sandbox: OverlaySandbox, real: Path) -> None:
    ref = sandbox.checkpoint()
    mess_up(sandbox)
    expected = view_state(sandbox)
    result = sandbox.apply()
    assert disk_state(real) == expected
    assert Change("src/pkg/deep/data.bin", ChangeKind.DELETED) in result.changes
    assert view_state(sandbox) == expected
    assert sandbox.changes_since_baseline() == []
    assert sandbox.checkpoints() == []
    with pytest.raises(CheckpointMissingError):
        sandbox.rollback(ref)
    assert sandbox.apply().changes == ()
    sandbox.write_bytes("src/main.py/second.txt", b"second")
    assert [c.path for c in sandbox.apply().changes] == ["src/main.py/second.txt"]
    assert (real / "src" / "main.py" / "second.txt").read_bytes() == b"second"


def test_apply_refuses_over_changes_in_the_real_directory(
    sandbox: OverlaySandbox, real: Path
) -> None:
    sandbox.write_bytes("README.md", b"ours\n")
    sandbox.write_bytes("docs/guide.txt", b"ours")
    (real / "README.md").write_text("theirs\n")
    (real / "unrelated.txt").write_text("fine")
    before = tree_state(real)
    with pytest.raises(SandboxError, match="README"):
        sandbox.apply()
    assert tree_state(real) == before


def test_discard(sandbox: OverlaySandbox, real: Path) -> None:
    before = tree_state(real)
    mess_up(sandbox)
    home = sandbox_home(sandbox)
    sandbox.discard()
    assert not home.exists()
    assert tree_state(real) == before
    with pytest.raises(SandboxError, match="discarded"):
        sandbox.read_bytes("README.md")


def test_create_and_open_refuse_what_they_cannot_do(
    sandbox: OverlaySandbox, real: Path, tmp_path: Path, plan_id: str
) -> None:
    strategy = OverlayStrategy()
    root = tmp_path / "sandboxes"
    with pytest.raises(SandboxError, match="already exists"):
        strategy.create(overlay_resource(real), plan_id, root)
    with pytest.raises(SandboxError, match="not the overlay sandbox of"):
        strategy.open(overlay_resource(real), new_ulid(), root)
    with pytest.raises(SandboxError, match="no overlay sandbox"):
        strategy.open(overlay_resource(real), plan_id, tmp_path / "nothing-here")
    copy = Resource(
        resource_id="local/files",
        kind="filesystem",
        location=str(real),
        sandbox_strategy="filesystem_copy",
    )
    with pytest.raises(SandboxError, match="strategy"):
        strategy.create(copy, new_ulid(), root)


# --- hostile layers ----------------------------------------------------------------------------

HOSTILE_RECORDS: dict[str, list[list[object]]] = {
    "parent path": [["f", "../x", 420, 1, "=x", False]],
    "absolute path": [["f", "/etc/x", 420, 1, "=x", False]],
    "nul in name": [["f", "a\x00b", 420, 1, "=x", False]],
    "device file": [["c", "dev", 420, 0, "", False]],
    "escaping link": [["l", "link", 511, 2, "..", False]],
    "absolute link": [["l", "link", 511, 4, "/etc", False]],
    "file through a link": [
        ["l", "etc", 511, 3, "src", False],
        ["f", "etc/passwd", 420, 1, "=x", False],
    ],
    "setuid mode": [["f", "x", 0o4755, 1, "=x", False]],
}


@pytest.mark.parametrize("case", sorted(HOSTILE_RECORDS))
def test_hostile_layer_is_refused_and_nothing_changes(
    sandbox: OverlaySandbox, real: Path, tmp_path: Path, case: str
) -> None:
    canary = Canary(tmp_path / "outside")
    before = tree_state(real)
    ref = sandbox.checkpoint()
    home = sandbox_home(sandbox)
    store = ObjectStore(home / "objects", durable=False)
    rows = [
        [*row[:4], store.put_bytes(str(row[4])[1:].encode()) if str(row[4]).startswith("=") else row[4], row[5]]
        for row in HOSTILE_RECORDS[case]
    ]  # fmt: skip
    layer = store.put_bytes(json.dumps({"v": 1, "e": rows}).encode())
    (home / "layers" / ref / "sealed").write_text(json.dumps({"v": 1, "layer": layer}))
    with pytest.raises(UnsafeInputError):
        sandbox.verify(ref)
    with pytest.raises(UnsafeInputError):
        OverlayStrategy(durable=False).open(
            sandbox.resource, sandbox_plan(sandbox), sandbox_root(sandbox)
        )
    assert tree_state(real) == before
    assert canary.unchanged()


def test_a_file_planted_under_a_link_of_a_lower_layer_is_refused(
    sandbox: OverlaySandbox, real: Path, tmp_path: Path
) -> None:
    """Layer 1 links ``etc`` outside-adjacent; layer 2 (planted) writes ``etc/passwd``."""
    canary = Canary(tmp_path / "outside")
    before = tree_state(real)
    sandbox.symlink("etc", "src")
    sandbox.checkpoint()
    top = sorted((sandbox_home(sandbox) / "layers").iterdir())[-1]
    oid = ObjectStore(sandbox_home(sandbox) / "objects", durable=False).put_bytes(b"owned")
    with open(top / "log", "ab") as log:
        log.write(json.dumps(["f", "etc/passwd", 420, 5, oid, False]).encode() + b"\n")
    with pytest.raises(UnsafeInputError):
        OverlayStrategy(durable=False).open(
            sandbox.resource, sandbox_plan(sandbox), sandbox_root(sandbox)
        )
    assert tree_state(real) == before
    assert canary.unchanged()


def test_pending_changes_lists_what_apply_lands_and_writes_nothing(
    sandbox: OverlaySandbox, real: Path, tmp_path: Path, plan_id: str
) -> None:
    """Opened as another process opens it (``agents plan apply --dry-run``): neither the
    opening nor the listing writes to the sandbox folder or the real directory."""
    from tests.sandbox.test_pending_changes import files

    mess_up(sandbox)
    sandbox.checkpoint()
    sandbox.write_bytes("late.txt", b"after the checkpoint\n")
    before = files(tmp_path)
    reopened = OverlayStrategy(durable=False).open(
        overlay_resource(real), plan_id, tmp_path / "sandboxes"
    )
    pending = reopened.pending_changes()
    assert files(tmp_path) == before
    assert "late.txt" in {change.path for change in pending}
    assert pending == list(reopened.apply().changes)
