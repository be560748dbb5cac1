"""The filesystem_copy sandbox against real directory trees in tmp_path."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cleveragents_tui.domain.errors import InvalidIdError
from cleveragents_tui.domain.ids import new_ulid
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    Change,
    ChangeKind,
    CheckpointMissingError,
    Sandbox,
    SandboxError,
)
from cleveragents_tui.sandbox.filesystem_copy import FilesystemCopySandbox, FilesystemCopyStrategy
from cleveragents_tui.sandbox.objectstore import packs
from cleveragents_tui.sandbox.objectstore.objects import ObjectStore
from cleveragents_tui.sandbox.safety import UnsafeInputError

State = dict[str, tuple[object, ...]]


def tree_state(root: Path) -> State:
    """Everything a rollback must restore: kinds, modes, bytes, file mtimes, link targets."""
    state: State = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = path.relative_to(root).as_posix()
            st = path.lstat()
            if stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                state[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                state[rel] = ("file", stat.S_IMODE(st.st_mode), path.read_bytes(), st.st_mtime_ns)
    return state


def build_tree(root: Path) -> None:
    """Nested folders, a binary file, an executable, an empty file, an empty dir, a link."""
    (root / "src" / "pkg" / "deep").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "empty-dir").mkdir()
    (root / "README.md").write_text("hello\n")
    (root / "src" / "main.py").write_text("print('hi')\n")
    (root / "src" / "pkg" / "__init__.py").write_bytes(b"")
    (root / "src" / "pkg" / "deep" / "data.bin").write_bytes(bytes(range(256)) * 40)
    (root / "docs" / "guide.txt").write_text("guide " * 100)
    tool = root / "run.sh"
    tool.write_text("#!/bin/sh\necho run\n")
    tool.chmod(0o755)
    (root / "src" / "pkg" / "readonly.cfg").write_text("fixed\n")
    (root / "src" / "pkg" / "readonly.cfg").chmod(0o444)
    os.symlink("src/main.py", root / "main-link")


class Canary:
    """Files outside the sandbox whose bytes and mtimes must never change."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "etc").mkdir(parents=True)
        (root / "x").write_text("canary x\n")
        (root / "etc" / "passwd").write_text("root:x:0:0\n")
        self.before = tree_state(root)

    def unchanged(self) -> bool:
        return tree_state(self.root) == self.before


@pytest.fixture
def real(tmp_path: Path) -> Path:
    root = tmp_path / "real"
    root.mkdir()
    build_tree(root)
    return root


def fs_resource(location: Path, name: str = "local/files") -> Resource:
    return Resource(
        resource_id=name,
        kind="filesystem",
        location=str(location),
        sandbox_strategy="filesystem_copy",
    )


@pytest.fixture
def plan_id() -> str:
    return new_ulid()


@pytest.fixture
def sandbox(real: Path, tmp_path: Path, plan_id: str) -> FilesystemCopySandbox:
    return FilesystemCopyStrategy(durable=False).create(
        fs_resource(real), plan_id, tmp_path / "sandboxes"
    )


def mess_up(work: Path) -> None:
    """Modify, add, delete, chmod, add an empty dir, remove an empty dir, retype a path."""
    (work / "README.md").write_text("changed\n")
    (work / "src" / "pkg" / "deep" / "data.bin").write_bytes(b"\x00\xff" * 7)
    (work / "new.txt").write_text("new\n")
    (work / "added" / "inner").mkdir(parents=True)
    (work / "added" / "inner" / "x.bin").write_bytes(b"\x01\x02")
    (work / "docs" / "guide.txt").unlink()
    (work / "run.sh").chmod(0o600)
    (work / "empty-dir").rmdir()
    (work / "new-empty").mkdir()
    (work / "src" / "main.py").unlink()
    (work / "src" / "main.py").mkdir()
    (work / "src" / "main.py" / "now-a-dir").write_text("surprise")
    (work / "main-link").unlink()
    os.symlink("README.md", work / "main-link")


# --- creating, checkpointing, rolling back -------------------------------------------------------


def test_create_copies_the_tree_exactly(sandbox: FilesystemCopySandbox, real: Path) -> None:
    assert isinstance(sandbox, Sandbox)
    assert tree_state(sandbox.workdir) == tree_state(real)
    assert sandbox.changes_since_baseline() == []


def test_rollback_restores_the_checkpoint_byte_for_byte(sandbox: FilesystemCopySandbox) -> None:
    work = sandbox.workdir
    ref = sandbox.checkpoint()
    expected = tree_state(work)
    mess_up(work)
    assert tree_state(work) != expected
    sandbox.rollback(ref)
    assert tree_state(work) == expected
    sandbox.verify(ref)


def test_rollback_several_checkpoints_back_and_forward_again(
    sandbox: FilesystemCopySandbox,
) -> None:
    work = sandbox.workdir
    refs, states = [], []
    for step in range(5):
        (work / f"step{step}.txt").write_text(f"step {step}\n")
        (work / "README.md").write_text(f"readme {step}\n")
        if step == 2:
            (work / "docs" / "guide.txt").unlink()
        refs.append(sandbox.checkpoint())
        states.append(tree_state(work))
    sandbox.rollback(refs[1])
    assert tree_state(work) == states[1]
    sandbox.rollback(refs[4])
    assert tree_state(work) == states[4]
    sandbox.rollback(refs[0])
    assert tree_state(work) == states[0]
    assert sandbox.checkpoints() == refs


def test_checkpoint_after_rollback_records_new_work(sandbox: FilesystemCopySandbox) -> None:
    work = sandbox.workdir
    first = sandbox.checkpoint()
    (work / "a.txt").write_text("a")
    sandbox.checkpoint()
    sandbox.rollback(first)
    (work / "b.txt").write_text("b")
    third = sandbox.checkpoint()
    assert sandbox.diff(first, third) == [Change("b.txt", ChangeKind.ADDED)]


def test_same_size_same_mtime_rewrite_is_detected_by_ctime(
    sandbox: FilesystemCopySandbox,
) -> None:
    """A tool may rewrite a file with same-size content and put its mtime back.

    The lstat cache compares ctime (which only the kernel sets) and inode too, so the
    change is seen without reading every file.
    """
    work = sandbox.workdir
    target = work / "README.md"
    first = sandbox.checkpoint()
    st = target.lstat()
    with open(target, "r+b") as handle:  # same inode, same size
        handle.write(b"HELLO\n")
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert target.lstat().st_size == st.st_size
    assert target.lstat().st_mtime_ns == st.st_mtime_ns
    second = sandbox.checkpoint()
    assert sandbox.diff(first, second) == [Change("README.md", ChangeKind.MODIFIED)]
    assert sandbox.read(second, "README.md") == b"HELLO\n"
    sandbox.rollback(first)
    assert target.read_bytes() == b"hello\n"


def test_rollback_does_not_touch_unchanged_files(sandbox: FilesystemCopySandbox) -> None:
    work = sandbox.workdir
    ref = sandbox.checkpoint()
    untouched = work / "docs" / "guide.txt"
    before = untouched.lstat()
    (work / "README.md").write_text("changed\n")
    sandbox.rollback(ref)
    after = untouched.lstat()
    assert (after.st_ino, after.st_ctime_ns) == (before.st_ino, before.st_ctime_ns)


def test_rollback_keeps_a_hard_link_partner_intact(sandbox: FilesystemCopySandbox) -> None:
    work = sandbox.workdir
    ref = sandbox.checkpoint()
    os.link(work / "README.md", work / "twin.md")
    (work / "README.md").write_text("both change\n")
    sandbox.rollback(ref)
    assert (work / "README.md").read_text() == "hello\n"
    assert not (work / "twin.md").exists()
    os.link(work / "docs" / "guide.txt", work / "twin2.txt")
    second = sandbox.checkpoint()
    (work / "docs" / "guide.txt").write_text("x")
    sandbox.rollback(second)
    assert (work / "twin2.txt").read_text() == "guide " * 100
    assert (work / "docs" / "guide.txt").read_text() == "guide " * 100


def test_read_only_directories_are_restored(sandbox: FilesystemCopySandbox) -> None:
    work = sandbox.workdir
    (work / "locked").mkdir()
    (work / "locked" / "inside.txt").write_text("in")
    (work / "locked").chmod(0o555)
    ref = sandbox.checkpoint()
    expected = tree_state(work)
    (work / "locked").chmod(0o755)
    (work / "locked" / "inside.txt").write_text("out")
    (work / "locked" / "extra.txt").write_text("extra")
    sandbox.rollback(ref)
    assert tree_state(work) == expected
    sandbox.rollback(ref)
    assert tree_state(work) == expected


def test_large_file_round_trip(sandbox: FilesystemCopySandbox) -> None:
    big = os.urandom(1 << 16) * 80  # 5 MiB: streamed, not read whole
    (sandbox.workdir / "big.bin").write_bytes(big)
    ref = sandbox.checkpoint()
    (sandbox.workdir / "big.bin").write_bytes(b"small")
    sandbox.rollback(ref)
    assert (sandbox.workdir / "big.bin").read_bytes() == big
    assert sandbox.read(ref, "big.bin") == big


def test_top_level_git_directory_is_left_alone(real: Path, tmp_path: Path, plan_id: str) -> None:
    (real / ".git").mkdir()
    (real / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    sandbox = FilesystemCopyStrategy(durable=False).create(
        fs_resource(real), plan_id, tmp_path / "s"
    )
    assert not (sandbox.workdir / ".git").exists()
    ref = sandbox.checkpoint()
    (sandbox.workdir / ".git").mkdir()
    (sandbox.workdir / ".git" / "config").write_text("x")
    sandbox.rollback(ref)
    assert (sandbox.workdir / ".git" / "config").read_text() == "x"
    assert sandbox.changes_since_baseline() == []


# --- diff, read, baseline ----------------------------------------------------------------------


def test_diff_lists_every_change_sorted(sandbox: FilesystemCopySandbox) -> None:
    first = sandbox.checkpoint()
    mess_up(sandbox.workdir)
    second = sandbox.checkpoint()
    expected = [
        Change("README.md", ChangeKind.MODIFIED),
        Change("added", ChangeKind.ADDED),
        Change("added/inner", ChangeKind.ADDED),
        Change("added/inner/x.bin", ChangeKind.ADDED),
        Change("docs/guide.txt", ChangeKind.DELETED),
        Change("empty-dir", ChangeKind.DELETED),
        Change("main-link", ChangeKind.MODIFIED),
        Change("new-empty", ChangeKind.ADDED),
        Change("new.txt", ChangeKind.ADDED),
        Change("run.sh", ChangeKind.MODIFIED),
        Change("src/main.py", ChangeKind.MODIFIED),
        Change("src/main.py/now-a-dir", ChangeKind.ADDED),
        Change("src/pkg/deep/data.bin", ChangeKind.MODIFIED),
    ]
    assert sandbox.diff(first, second) == expected
    assert sandbox.diff(second, second) == []
    assert {c.path for c in sandbox.diff(second, first)} == {c.path for c in expected}


def test_read_returns_content_at_a_checkpoint(sandbox: FilesystemCopySandbox) -> None:
    first = sandbox.checkpoint()
    (sandbox.workdir / "README.md").write_text("second\n")
    second = sandbox.checkpoint()
    assert sandbox.read(first, "README.md") == b"hello\n"
    assert sandbox.read(second, "README.md") == b"second\n"
    assert sandbox.read(first, "src/pkg/__init__.py") == b""
    assert sandbox.read(first, "main-link") == b"src/main.py"
    assert sandbox.read(first, "src") is None
    assert sandbox.read(first, "nope.txt") is None
    assert sandbox.read(first, "README.md/below") is None
    with pytest.raises(UnsafeInputError):
        sandbox.read(first, "../real/README.md")
    with pytest.raises(UnsafeInputError):
        sandbox.read(first, "/etc/passwd")


def test_changes_since_baseline(sandbox: FilesystemCopySandbox) -> None:
    work = sandbox.workdir
    (work / "README.md").write_text("changed\n")
    (work / "docs" / "guide.txt").unlink()
    (work / "fresh").mkdir()
    (work / "run.sh").chmod(0o700)
    assert sandbox.changes_since_baseline() == [
        Change("README.md", ChangeKind.MODIFIED),
        Change("docs/guide.txt", ChangeKind.DELETED),
        Change("fresh", ChangeKind.ADDED),
        Change("run.sh", ChangeKind.MODIFIED),
    ]
    (work / "README.md").write_text("hello\n")  # back to the original content
    assert Change("README.md", ChangeKind.MODIFIED) not in sandbox.changes_since_baseline()


# --- apply and discard -------------------------------------------------------------------------


def test_apply_lands_changes_on_the_real_directory(
    sandbox: FilesystemCopySandbox, real: Path
) -> None:
    mess_up(sandbox.workdir)
    expected = tree_state(sandbox.workdir)
    result = sandbox.apply()
    assert tree_state(real) == expected
    assert Change("docs/guide.txt", ChangeKind.DELETED) in result.changes
    assert Change("new.txt", ChangeKind.ADDED) in result.changes
    assert list(result.changes) == sorted(result.changes, key=lambda c: c.path)
    assert sandbox.changes_since_baseline() == []
    again = sandbox.apply()
    assert again.changes == ()
    (sandbox.workdir / "later.txt").write_text("later")
    assert [c.path for c in sandbox.apply().changes] == ["later.txt"]
    assert (real / "later.txt").read_text() == "later"


def test_apply_refuses_when_the_real_directory_changed(
    sandbox: FilesystemCopySandbox, real: Path
) -> None:
    (sandbox.workdir / "README.md").write_text("from the sandbox\n")
    (sandbox.workdir / "docs" / "guide.txt").write_text("sandbox guide")
    (real / "README.md").write_text("someone else\n")
    before = tree_state(real)
    with pytest.raises(SandboxError, match=r"README\.md"):
        sandbox.apply()
    assert tree_state(real) == before


def test_apply_refuses_to_delete_a_folder_that_gained_files(
    sandbox: FilesystemCopySandbox, real: Path
) -> None:
    for path in sorted((sandbox.workdir / "docs").iterdir()):
        path.unlink()
    (sandbox.workdir / "docs").rmdir()
    (real / "docs" / "theirs.txt").write_text("not ours")
    with pytest.raises(SandboxError, match="docs"):
        sandbox.apply()
    assert (real / "docs" / "theirs.txt").read_text() == "not ours"


def test_apply_refuses_to_replace_a_folder_that_gained_files(
    sandbox: FilesystemCopySandbox, real: Path
) -> None:
    shutil.rmtree(sandbox.workdir / "docs")
    (sandbox.workdir / "docs").write_text("a file now")
    (real / "docs" / "theirs.txt").write_text("not ours")
    with pytest.raises(SandboxError, match="docs"):
        sandbox.apply()
    assert (real / "docs" / "theirs.txt").read_text() == "not ours"


def test_apply_accepts_a_touched_but_unchanged_real_file(
    sandbox: FilesystemCopySandbox, real: Path
) -> None:
    os.utime(real / "README.md")  # same content, new times
    (sandbox.workdir / "README.md").write_text("mine\n")
    sandbox.apply()
    assert (real / "README.md").read_text() == "mine\n"


def test_a_later_apply_leaves_what_others_changed_elsewhere(
    sandbox: FilesystemCopySandbox, real: Path
) -> None:
    """Someone edits a file the plan never touches; neither apply undoes it, and the file
    they add next to it (a FIFO, which a sandbox cannot record) does not stop them."""
    (real / "README.md").write_text("someone else\n")
    os.mkfifo(real / "their-pipe")
    (sandbox.workdir / "new.txt").write_text("first\n")
    assert [c.path for c in sandbox.apply().changes] == ["new.txt"]
    (sandbox.workdir / "new.txt").write_text("second\n")
    (sandbox.workdir / "more.txt").write_text("more\n")
    assert [c.path for c in sandbox.apply().changes] == ["more.txt", "new.txt"]
    assert (real / "new.txt").read_text() == "second\n"
    assert (real / "README.md").read_text() == "someone else\n"
    assert stat.S_ISFIFO((real / "their-pipe").lstat().st_mode)
    assert sandbox.apply().changes == ()


def test_discard_removes_the_sandbox_only(
    sandbox: FilesystemCopySandbox, real: Path, tmp_path: Path
) -> None:
    before = tree_state(real)
    ref = sandbox.checkpoint()
    home = sandbox.workdir.parent
    sandbox.discard()
    assert not home.exists()
    assert tree_state(real) == before
    with pytest.raises(SandboxError, match="discarded"):
        sandbox.rollback(ref)


# --- drop, verify, reopen ----------------------------------------------------------------------


def test_drop_checkpoint_keeps_the_others_valid(sandbox: FilesystemCopySandbox) -> None:
    work = sandbox.workdir
    refs, states = [], []
    for step in range(4):
        (work / f"f{step}.txt").write_text(str(step))
        (work / "README.md").write_text(f"v{step}\n")
        refs.append(sandbox.checkpoint())
        states.append(tree_state(work))
    sandbox.drop_checkpoint(refs[1])
    sandbox.drop_checkpoint(refs[3])
    assert sandbox.checkpoints() == [refs[0], refs[2]]
    for ref in (refs[0], refs[2]):
        sandbox.verify(ref)
    sandbox.rollback(refs[0])
    assert tree_state(work) == states[0]
    sandbox.rollback(refs[2])
    assert tree_state(work) == states[2]
    with pytest.raises(CheckpointMissingError):
        sandbox.verify(refs[1])
    with pytest.raises(CheckpointMissingError):
        sandbox.rollback(refs[3])
    with pytest.raises(CheckpointMissingError):
        sandbox.drop_checkpoint(refs[1])


def test_drops_are_recorded_and_their_objects_collected(
    sandbox: FilesystemCopySandbox, real: Path, tmp_path: Path, plan_id: str
) -> None:
    work = sandbox.workdir
    first = sandbox.checkpoint()
    (work / "only-in-second.bin").write_bytes(os.urandom(300))
    second = sandbox.checkpoint()
    blob = sandbox._trees.lookup(sandbox._root_of(second).root, "only-in-second.bin")
    assert blob is not None
    sandbox.rollback(first)  # else work/ (the index) still needs the file
    sandbox.drop_checkpoint(second)
    reopened = FilesystemCopyStrategy(durable=False).open(
        fs_resource(real), plan_id, tmp_path / "sandboxes"
    )
    assert reopened.checkpoints() == [first]
    with pytest.raises(CheckpointMissingError):
        reopened.verify(second)
    assert blob.ref not in ObjectStore(sandbox.home / "objects", durable=False).oids()
    third = reopened.checkpoint()  # a new reference, never the dropped one again
    assert third > second


def test_a_checkpoint_cut_short_by_a_crash_is_not_listed(
    sandbox: FilesystemCopySandbox, real: Path, tmp_path: Path, plan_id: str
) -> None:
    work = sandbox.workdir
    first = sandbox.checkpoint()
    state = tree_state(work)
    (journal,) = (sandbox.home / "objects" / "packs").glob("*.log")
    size = journal.stat().st_size
    mess_up(work)
    cut = sandbox.checkpoint()
    journal.chmod(0o644)
    with open(journal, "r+b") as handle:  # the disk kept only part of the last append
        handle.truncate(size + 40)
    reopened = FilesystemCopyStrategy(durable=False).open(
        fs_resource(real), plan_id, tmp_path / "sandboxes"
    )
    assert reopened.checkpoints() == [first]
    with pytest.raises(CheckpointMissingError):
        reopened.rollback(cut)
    reopened.rollback(first)
    assert tree_state(work) == state
    mess_up(work)
    again = reopened.checkpoint()
    reopened.rollback(first)
    reopened.rollback(again)
    assert reopened.checkpoints() == [first, again]


def test_a_durable_checkpoint_flushes_once(
    real: Path, tmp_path: Path, plan_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The objects and the record of a checkpoint reach the disk in one fdatasync."""
    sandbox = FilesystemCopyStrategy().create(fs_resource(real), plan_id, tmp_path / "sandboxes")
    sandbox.checkpoint()
    flushes: list[str] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def fsync(fd: int) -> None:
        flushes.append("fsync")
        real_fsync(fd)

    def fdatasync(fd: int) -> None:
        flushes.append("fdatasync")
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(packs, "_fdatasync", fdatasync)
    for step in range(3):
        (sandbox.workdir / "README.md").write_text(f"step {step}\n")
        sandbox.checkpoint()
    assert flushes == ["fdatasync"] * 3


def test_reopen_in_a_new_object(
    sandbox: FilesystemCopySandbox, real: Path, tmp_path: Path, plan_id: str
) -> None:
    work = sandbox.workdir
    first = sandbox.checkpoint()
    state = tree_state(work)
    mess_up(work)
    second = sandbox.checkpoint()
    later = tree_state(work)
    reopened = FilesystemCopyStrategy(durable=False).open(
        fs_resource(real), plan_id, tmp_path / "sandboxes"
    )
    assert reopened.workdir == work
    assert reopened.checkpoints() == [first, second]
    reopened.verify(first)
    reopened.rollback(first)
    assert tree_state(work) == state
    (work / "index-lost.txt").write_text("x")
    (work.parent / "index").unlink()  # the lstat cache is only an optimisation
    again = FilesystemCopyStrategy(durable=False).open(
        fs_resource(real), plan_id, tmp_path / "sandboxes"
    )
    third = again.checkpoint()
    assert third not in (first, second)
    assert again.diff(first, third) == [Change("index-lost.txt", ChangeKind.ADDED)]
    again.rollback(second)
    assert tree_state(work) == later


def test_open_a_sandbox_another_process_made(real: Path, tmp_path: Path, plan_id: str) -> None:
    script = (
        "import sys; from pathlib import Path\n"
        "from tests.sandbox.test_filesystem_copy import fs_resource\n"
        "from cleveragents_tui.sandbox.filesystem_copy import FilesystemCopyStrategy\n"
        "box = FilesystemCopyStrategy().create(fs_resource(Path(sys.argv[1])), sys.argv[2],"
        " Path(sys.argv[3]))\n"
        "print(box.checkpoint())\n"
        "(box.workdir / 'README.md').write_text('child was here')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(real), plan_id, str(tmp_path / "sandboxes")],
        capture_output=True,
        check=True,
        cwd=Path(__file__).parents[2],
    )
    ref = done.stdout.decode().strip()
    sandbox = FilesystemCopyStrategy().open(fs_resource(real), plan_id, tmp_path / "sandboxes")
    assert sandbox.checkpoints() == [ref]
    assert sandbox.changes_since_baseline() == [Change("README.md", ChangeKind.MODIFIED)]
    sandbox.rollback(ref)
    assert tree_state(sandbox.workdir) == tree_state(real)


def test_create_and_open_refuse_what_they_cannot_do(
    sandbox: FilesystemCopySandbox, real: Path, tmp_path: Path, plan_id: str
) -> None:
    strategy = FilesystemCopyStrategy()
    root = tmp_path / "sandboxes"
    with pytest.raises(SandboxError, match="already exists"):
        strategy.create(fs_resource(real), plan_id, root)
    with pytest.raises(SandboxError, match="not the filesystem_copy sandbox of"):
        strategy.open(fs_resource(real), new_ulid(), root)  # another plan's
    with pytest.raises(SandboxError, match="no filesystem_copy sandbox"):
        strategy.open(fs_resource(real), plan_id, tmp_path / "nothing-here")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "someone-elses.txt").write_text("x")
    with pytest.raises(SandboxError, match="not empty"):
        strategy.create(fs_resource(real), new_ulid(), tmp_path / "busy")
    with pytest.raises(InvalidIdError):
        strategy.create(fs_resource(real), "../escape", root)
    with pytest.raises(SandboxError, match="not a directory"):
        strategy.create(fs_resource(real / "README.md"), new_ulid(), root)
    overlay = Resource(
        resource_id="local/files", kind="filesystem", location=str(real), sandbox_strategy="overlay"
    )
    with pytest.raises(SandboxError, match="strategy"):
        strategy.create(overlay, new_ulid(), root)
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(SandboxError, match="not the filesystem_copy sandbox of"):
        strategy.open(fs_resource(other), plan_id, root)


def test_verify_detects_missing_and_damaged_objects(
    sandbox: FilesystemCopySandbox, plan_id: str
) -> None:
    first = sandbox.checkpoint()
    # One journal per sandbox object: each checkpoint appends its objects and record to it.
    (journal,) = (sandbox.home / "objects" / "packs").glob("*.log")
    before = journal.stat().st_size
    (sandbox.workdir / "unique.txt").write_text("only in this checkpoint")
    ref = sandbox.checkpoint()
    sandbox.verify(ref)
    pristine = journal.read_bytes()
    journal.chmod(0o644)
    for damage in (before + 2, -5):  # inside the checkpoint's first object; in its trailer
        data = bytearray(pristine)
        data[damage] ^= 0xFF
        journal.write_bytes(bytes(data))
        fresh = FilesystemCopyStrategy(durable=False).open(sandbox.resource, plan_id, sandbox.home)
        with pytest.raises(CheckpointMissingError):
            fresh.verify(ref)
        fresh.verify(first)  # the other checkpoint does not need that part of the journal
    with pytest.raises(CheckpointMissingError):
        fresh.verify("999999-deadbeef")
    with pytest.raises(CheckpointMissingError):
        fresh.verify("HEAD~1")


def test_special_files_and_escaping_links_cannot_be_checkpointed(
    sandbox: FilesystemCopySandbox, tmp_path: Path
) -> None:
    work = sandbox.workdir
    ref = sandbox.checkpoint()
    expected = tree_state(work)
    os.mkfifo(work / "pipe")
    with pytest.raises(SandboxError, match="pipe"):
        sandbox.checkpoint()
    sandbox.rollback(ref)
    assert tree_state(work) == expected
    os.symlink(str(tmp_path), work / "escape")
    with pytest.raises(SandboxError, match="escape"):
        sandbox.checkpoint()
    os.symlink("../../../..", work / "src" / "up")
    sandbox.rollback(ref)
    assert tree_state(work) == expected
    (work / "back\\slash").write_text("x")
    with pytest.raises(SandboxError, match="slash"):
        sandbox.checkpoint()


# --- hostile checkpoints -----------------------------------------------------------------------

Row = list[object]


def plant(sandbox: FilesystemCopySandbox, trees: list[list[Row]]) -> str:
    """Store hand-written tree objects (the last is the root) and a checkpoint naming it,
    as another process would (the sandbox object finds it when asked for it).

    A row is [name, kind, mode, size, mtime_ns, ino, ctime_ns, ref]; a ref of the form
    ``@n`` names the n-th tree of ``trees``, ``=text`` a blob with that content.
    """
    store = ObjectStore(sandbox.workdir.parent / "objects", durable=False)
    with store.batch():
        return _plant(store, trees)


def _plant(store: ObjectStore, trees: list[list[Row]]) -> str:
    ids: list[str] = []
    for rows in trees:
        fixed = []
        for row in sorted(rows, key=lambda row: str(row[0])):
            if len(row) != 8:
                fixed.append(row)
                continue
            ref = row[7]
            if isinstance(ref, str) and ref.startswith("@"):
                ref = ids[int(ref[1:])]
            elif isinstance(ref, str) and ref.startswith("="):
                ref = store.put_bytes(ref[1:].encode())
            fixed.append([*row[:7], ref])
        ids.append(store.put_bytes(json.dumps({"v": 1, "e": fixed}).encode()))
    ref = "900000-0badc0de"
    store.add_note(json.dumps({"v": 1, "checkpoint": ref, "root": ids[-1], "stamp": 0}).encode())
    return ref


def file_row(name: str, content: str, mode: int = 0o644) -> Row:
    return [name, "f", mode, len(content), 0, 0, 0, "=" + content]


HOSTILE: dict[str, list[list[Row]]] = {
    "dot-dot name": [[file_row("..", "x")]],
    "parent path": [[file_row("../x", "x")]],
    "absolute path": [[file_row("/etc/x", "x")]],
    "nul in name": [[file_row("a\x00b", "x")]],
    "backslash": [[file_row("..\\x", "x")]],
    "git metadata": [[file_row(".git", "x")]],
    "device file": [[["dev", "c", 0o644, 0, 0, 0, 0, "=x"]]],
    "fifo": [[["pipe", "p", 0o644, 0, 0, 0, 0, "=x"]]],
    "mode with type bits": [[file_row("x", "x", mode=0o20644)]],
    "absolute link": [[["link", "l", 0o777, 4, 0, 0, 0, "/etc"]]],
    "escaping link": [[["link", "l", 0o777, 4, 0, 0, 0, "../.."]]],
    "link through a link": [
        [["a", "l", 0o777, 1, 0, 0, 0, "."], ["b", "l", 0o777, 4, 0, 0, 0, "a/.."]]
    ],
    "deep escaping link": [
        [["l", "l", 0o777, 5, 0, 0, 0, "../../x"]],
        [["d", "d", 0o755, 0, 0, 0, 0, "@0"]],
    ],
    "duplicate name": [[file_row("a", "x"), file_row("a", "y")]],
    "not a tree": [[["a"]]],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_checkpoint_is_refused_and_nothing_changes(
    sandbox: FilesystemCopySandbox, tmp_path: Path, case: str
) -> None:
    canary = Canary(tmp_path / "outside")
    work = sandbox.workdir
    (work / "README.md").write_text("work in progress\n")
    before = tree_state(work)
    # A valid, differing directory first, so a half-done restore would show.
    trees = HOSTILE[case]
    good = [file_row("zz-good.txt", "good")]
    planted = [good, *trees[:-1], [["aaa", "d", 0o755, 0, 0, 0, 0, "@0"], *shift(trees[-1])]]
    ref = plant(sandbox, planted)
    with pytest.raises((UnsafeInputError, SandboxError)):
        sandbox.rollback(ref)
    with pytest.raises((UnsafeInputError, SandboxError)):
        sandbox.verify(ref)
    assert tree_state(work) == before
    assert canary.unchanged()


def shift(rows: list[Row]) -> list[Row]:
    """Renumber ``@n`` references after one tree was put in front."""
    return [
        [*row[:7], f"@{int(str(row[7])[1:]) + 1}"] if str(row[7:8]).startswith("['@") else row
        for row in rows
    ]


def test_symlink_planted_in_work_is_not_written_through(
    sandbox: FilesystemCopySandbox, tmp_path: Path
) -> None:
    """A tool links ``etc`` to a real folder outside; the checkpoint has a folder ``etc``."""
    canary = Canary(tmp_path / "outside")
    work = sandbox.workdir
    (work / "etc").mkdir()
    (work / "etc" / "passwd").write_text("sandbox passwd\n")
    (work / "x").write_text("sandbox x\n")
    ref = sandbox.checkpoint()
    expected = tree_state(work)
    (work / "etc" / "passwd").unlink()
    (work / "etc").rmdir()
    os.symlink(canary.root / "etc", work / "etc")
    (work / "x").unlink()
    os.symlink(canary.root / "x", work / "x")
    sandbox.rollback(ref)
    assert tree_state(work) == expected
    assert canary.unchanged()


def test_hostile_tree_entry_under_a_link_in_work(
    sandbox: FilesystemCopySandbox, tmp_path: Path
) -> None:
    """Even if a planted link survived planning, the writer refuses to go through it."""
    canary = Canary(tmp_path / "outside")
    work = sandbox.workdir
    ref = plant(
        sandbox,
        [[file_row("passwd", "owned\n")], [["etc", "d", 0o755, 0, 0, 0, 0, "@0"]]],
    )
    os.symlink(canary.root / "etc", work / "etc")
    sandbox.rollback(ref)
    assert (work / "etc").is_dir() and not (work / "etc").is_symlink()
    assert (work / "etc" / "passwd").read_text() == "owned\n"
    assert canary.unchanged()
