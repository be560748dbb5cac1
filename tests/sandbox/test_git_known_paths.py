"""A git_worktree checkpoint from the paths the file tools named, without ``git status``.

The edits go through the file tools' own operations (:func:`files_of`), which hand out the
worktree for the paths of each change. Where the checkpoint may stage those paths alone,
``git status`` is refused by a failpoint, so the test fails if it scans. Either way the
checkpoint must be exact: rolled to from another state by a sandbox object that trusts
nothing, it gives back the worktree as the edits left it, folder for folder, bit for bit;
and its tree is the one a full scan of the same state writes.
"""

from __future__ import annotations

import gc
import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cleveragents_tui import failpoints
from cleveragents_tui.actors.sandbox_files import SandboxFiles, files_of
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.git import GitWorktreeSandbox, GitWorktreeStrategy

PLAN = "01HXPLAN0000000000000000KP"

State = dict[str, tuple[str, int, bytes]]


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=True)
    return done.stdout.decode()


def state(root: Path) -> State:
    """Every folder, file and symlink under ``root`` but the top .git: kind, bits, bytes."""
    found: State = {}
    for folder, dirnames, filenames in os.walk(root):
        here = Path(folder)
        if here == root:
            dirnames[:] = [d for d in dirnames if d != ".git"]
            filenames = [f for f in filenames if f != ".git"]
        for name in [*dirnames, *filenames]:
            path = here / name
            info = path.lstat()
            key = path.relative_to(root).as_posix()
            if stat.S_ISLNK(info.st_mode):
                found[key] = ("link", 0, os.readlink(path).encode())
            elif stat.S_ISDIR(info.st_mode):
                found[key] = ("dir", stat.S_IMODE(info.st_mode), b"")
            else:
                found[key] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
    return found


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key, value in {"NAME": "User", "EMAIL": "user@example.com"}.items():
        monkeypatch.setenv(f"GIT_AUTHOR_{key}", value)
        monkeypatch.setenv(f"GIT_COMMITTER_{key}", value)
    failpoints.reset()


@pytest.fixture
def resource(tmp_path: Path) -> Resource:
    repo = tmp_path / "repo"
    (repo / "src" / "pkg" / "deep").mkdir(parents=True)
    (repo / "bin").mkdir()
    (repo / "README.md").write_text("# demo\n")
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    (repo / "src" / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (repo / "src" / "pkg" / "deep" / "data.json").write_text("[1, 2]\n")
    (repo / "bin" / "run.sh").write_text("#!/bin/sh\necho run\n")
    (repo / "bin" / "run.sh").chmod(0o755)
    (repo / "link.py").symlink_to("src/pkg/mod.py")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return Resource(
        resource_id="local/known-paths",
        kind="git",
        location=str(repo),
        sandbox_strategy=SandboxStrategyName.GIT_WORKTREE,
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sandboxes" / "plan"


def tracked(resource: Resource, root: Path, *, create: bool = False) -> GitWorktreeSandbox:
    """A sandbox object as the engine opens it: it trusts the handouts."""
    strategy = GitWorktreeStrategy()
    made = strategy.create(resource, PLAN, root) if create else strategy.open(resource, PLAN, root)
    made.track_handouts()
    return made


def refuse_status(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(failpoints.ENV_VAR, "git.call@status")
    failpoints.reset()


def allow_git(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(failpoints.ENV_VAR, raising=False)
    failpoints.reset()


Edit = Callable[[SandboxFiles], None]


def files(sandbox: GitWorktreeSandbox) -> SandboxFiles:
    """The file tools' operations on the sandbox (each change names its paths first)."""
    found = files_of(sandbox, lambda: None)
    assert found is not None
    return found


def new_file_in_new_folders(files: SandboxFiles) -> None:
    files.write("fresh/dir/x.bin", b"\x00\x01\x02", None)


def edit_and_delete(files: SandboxFiles) -> None:
    files.write("src/pkg/mod.py", b"def f():\n    return 2\n", None)
    files.delete("src/pkg/deep/data.json")  # its folder stays, empty


def modes(files: SandboxFiles) -> None:
    files.write("bin/new.sh", b"#!/bin/sh\n", 0o755)
    files.chmod("README.md", 0o600)
    files.chmod("bin/run.sh", 0o644)
    files.chmod("src/pkg", 0o700)


def links_and_a_move(files: SandboxFiles) -> None:
    files.symlink("latest", "README.md")
    files.move("link.py", "moved/link.py")


def file_becomes_folder(files: SandboxFiles) -> None:
    files.delete("README.md")
    files.write("README.md/inside.txt", b"a folder where a file was\n", None)


def written_then_deleted(files: SandboxFiles) -> None:
    files.write("src/scratch.txt", b"gone again\n", None)
    files.delete("src/scratch.txt")
    files.write("kept.txt", b"kept\n", None)


FAST: dict[str, Edit] = {
    f.__name__: f
    for f in (
        new_file_in_new_folders,
        edit_and_delete,
        modes,
        links_and_a_move,
        file_becomes_folder,
    )
}


def an_ignored_file(files: SandboxFiles) -> None:
    files.write("build/out.o", b"ignored\n", None)
    files.write("debug.log", b"ignored too\n", None)


def new_ignore_rules(files: SandboxFiles) -> None:
    files.write(".gitignore", b"*.json\n", None)


def an_empty_folder(files: SandboxFiles) -> None:
    files.make_dir("empty/inner", 0o750)


def a_folder_removed(files: SandboxFiles) -> None:
    files.remove("src/pkg")


# Exact too, by the full scan: what the named paths alone cannot vouch for.
SCANNED: dict[str, Edit] = {
    f.__name__: f for f in (an_ignored_file, new_ignore_rules, an_empty_folder, a_folder_removed)
}


def check_exact(
    resource: Resource, root: Path, sandbox: GitWorktreeSandbox, before: str, made: str
) -> None:
    """``made`` holds the worktree as it is: rolled to from ``before`` by an object that
    trusts nothing, and against the tree a full scan writes of the same state."""
    edited = state(sandbox.workdir)
    scanning = GitWorktreeStrategy().open(resource, PLAN, root)  # no promise: it scans
    scanned = scanning.checkpoint()
    assert scanning.diff(made, scanned) == []
    scanning.rollback(before)
    assert state(scanning.workdir) != edited
    scanning.rollback(made)
    assert state(scanning.workdir) == edited


@pytest.mark.parametrize("edit", sorted(FAST))
def test_a_checkpoint_stages_the_paths_the_tools_named_without_git_status(
    resource: Resource, root: Path, monkeypatch: pytest.MonkeyPatch, edit: str
) -> None:
    sandbox = tracked(resource, root, create=True)
    before = sandbox.checkpoint()
    FAST[edit](files(sandbox))
    refuse_status(monkeypatch)
    made = sandbox.checkpoint()
    allow_git(monkeypatch)
    check_exact(resource, root, sandbox, before, made)


def test_written_then_deleted_paths_leave_nothing_behind(
    resource: Resource, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = tracked(resource, root, create=True)
    before = sandbox.checkpoint()
    written_then_deleted(files(sandbox))
    refuse_status(monkeypatch)
    made = sandbox.checkpoint()
    allow_git(monkeypatch)
    assert sandbox.read(made, "src/scratch.txt") is None
    assert sandbox.read(made, "kept.txt") == b"kept\n"
    check_exact(resource, root, sandbox, before, made)


@pytest.mark.parametrize("edit", sorted(SCANNED))
def test_what_the_named_paths_cannot_vouch_for_is_scanned_and_exact(
    resource: Resource, root: Path, edit: str
) -> None:
    sandbox = tracked(resource, root, create=True)
    before = sandbox.checkpoint()
    SCANNED[edit](files(sandbox))
    made = sandbox.checkpoint()
    check_exact(resource, root, sandbox, before, made)


def test_another_process_takes_the_checkpoint_from_the_named_paths(
    resource: Resource, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paths are kept beside the worktree: a correction's safety checkpoint, in a
    process that opened the sandbox anew, stages them without a scan, and rolls back."""
    running = tracked(resource, root, create=True)
    before = running.checkpoint()
    edit_and_delete(files(running))
    edited = state(running.hand_out(()))  # a look, not a handout for writing
    del running
    gc.collect()
    correcting = tracked(resource, root)
    refuse_status(monkeypatch)
    safety = correcting.checkpoint()
    correcting.rollback(before, current=safety)
    allow_git(monkeypatch)
    assert correcting.read(before, "src/pkg/deep/data.json") == b"[1, 2]\n"
    assert (correcting.workdir / "src/pkg/deep/data.json").read_bytes() == b"[1, 2]\n"
    correcting.rollback(safety, current=before)
    assert state(correcting.workdir) == edited


def test_a_path_written_without_a_handout_is_not_in_the_checkpoint(
    resource: Resource, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The promise is the owner's: a write nobody was handed the worktree for (a person's
    edit while the plan runs) is not seen; once the worktree is handed out whole (a
    command, or reconciliation sealing it when the plan stops), the next checkpoint scans
    and has it."""
    sandbox = tracked(resource, root, create=True)
    sandbox.checkpoint()
    work = sandbox.hand_out(())
    files(sandbox).write("named.txt", b"named\n", None)
    (work / "by-hand.txt").write_bytes(b"not named\n")
    refuse_status(monkeypatch)
    made = sandbox.checkpoint()
    allow_git(monkeypatch)
    assert sandbox.read(made, "named.txt") == b"named\n"
    assert sandbox.read(made, "by-hand.txt") is None
    assert sandbox.workdir == work  # handed out whole: the next checkpoint scans
    assert sandbox.read(sandbox.checkpoint(), "by-hand.txt") == b"not named\n"


def test_a_torn_list_of_paths_is_not_trusted(
    resource: Resource, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash in the middle of naming a path leaves the list without its last NUL: the
    next checkpoint cannot tell what was written, so it scans."""
    sandbox = tracked(resource, root, create=True)
    sandbox.checkpoint()
    mark = root.resolve() / "untouched"
    assert mark.exists()
    with mark.open("ab") as torn:
        torn.write(b"src/pk")
    (sandbox.hand_out(()) / "src" / "pkg" / "mod.py").write_bytes(b"changed\n")
    refuse_status(monkeypatch)
    with pytest.raises(Exception, match="status"):
        sandbox.checkpoint()
    allow_git(monkeypatch)
    assert sandbox.read(sandbox.checkpoint(), "src/pkg/mod.py") == b"changed\n"


@pytest.mark.parametrize("path", ["../outside", "/etc/passwd", ".git/config", "a/.git/x", ""])
def test_handouts_refuse_paths_outside_the_worktree(
    resource: Resource, root: Path, path: str
) -> None:
    sandbox = tracked(resource, root, create=True)
    with pytest.raises(Exception, match="path"):
        sandbox.hand_out([path])


def test_a_safety_checkpoint_in_another_process_needs_no_git_process_of_its_own(
    resource: Resource, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing was handed out since the plan's last checkpoint: the correction's process
    takes its safety checkpoint from the mark (the tip and its tree), without ``status``
    and without asking git for the tip's tree."""
    running = tracked(resource, root, create=True)
    files(running).write("src/pkg/mod.py", b"def f():\n    return 3\n", None)
    decision = running.checkpoint()
    del running
    gc.collect()
    correcting = tracked(resource, root)
    monkeypatch.setenv(failpoints.ENV_VAR, "git.call@status,git.call@rev-parse")
    failpoints.reset()
    safety = correcting.checkpoint()
    allow_git(monkeypatch)
    assert correcting.diff(decision, safety) == []
    assert correcting.read(safety, "src/pkg/mod.py") == b"def f():\n    return 3\n"
