"""A git_worktree rollback is exact where git is blind: empty folders, ignored files, modes.

Each test runs both ways a rollback runs: from the safety checkpoint the rollback protocol
has just taken (``current=``: git writes only what the two checkpoints differ in, and the
full ``checkout --force`` + ``clean`` is refused by a failpoint, so the test fails if the
fast path is not the one taken) and from any state (the full rollback). What a replayed
command sees afterwards is checked with the commands a plan would run (``rm -r``, ``ls``).
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from cleveragents_tui import failpoints
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.git import GitWorktreeSandbox, GitWorktreeStrategy

PLAN = "01HXPLAN0000000000000000CC"
PATHS = ["fast", "full"]

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


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key, value in {"NAME": "User", "EMAIL": "user@example.com"}.items():
        monkeypatch.setenv(f"GIT_AUTHOR_{key}", value)
        monkeypatch.setenv(f"GIT_COMMITTER_{key}", value)


@pytest.fixture
def resource(tmp_path: Path) -> Resource:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    (repo / "src" / "app.py").write_text("print('app')\n")
    (repo / "README.md").write_text("# repo\n")
    (repo / "run.sh").write_text("#!/bin/sh\n")
    (repo / "run.sh").chmod(0o755)
    (repo / "link").symlink_to("src/app.py")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    return Resource(
        resource_id="local/repo",
        kind="git",
        location=str(repo),
        sandbox_strategy=SandboxStrategyName.GIT_WORKTREE,
    )


@pytest.fixture
def sandbox(resource: Resource, tmp_path: Path) -> GitWorktreeSandbox:
    return GitWorktreeStrategy().create(resource, PLAN, tmp_path / "sandboxes" / "plan")


def roll_back(
    sandbox: GitWorktreeSandbox, target: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Roll back as the engine does: ``fast`` from a safety checkpoint taken now (with the
    full rollback refused, so only the fast path can succeed), ``full`` from no checkpoint."""
    if how == "full":
        sandbox.rollback(target)
        return
    safety = sandbox.checkpoint()
    monkeypatch.setenv(failpoints.ENV_VAR, "git.call@checkout,git.call@clean")
    failpoints.reset()
    try:
        sandbox.rollback(target, current=safety)
    finally:
        monkeypatch.delenv(failpoints.ENV_VAR)
        failpoints.reset()


def run(work: Path, *command: str) -> subprocess.CompletedProcess[bytes]:
    """A command a replayed decision runs in the sandbox."""
    return subprocess.run(command, cwd=work, capture_output=True, check=False)


@pytest.mark.parametrize("how", PATHS)
def test_empty_folders_come_and_go_with_the_rollback(
    sandbox: GitWorktreeSandbox, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = sandbox.workdir
    (work / "empty" / "inner").mkdir(parents=True)
    (work / "doomed").mkdir()
    target = sandbox.checkpoint()
    at_target = state(work)
    (work / "doomed").rmdir()  # deleted after the target: comes back
    (work / "made" / "later").mkdir(parents=True)  # made after the target: goes
    (work / "src" / "new-empty").mkdir()
    sandbox.checkpoint()
    roll_back(sandbox, target, how, monkeypatch)
    assert state(work) == at_target
    assert run(work, "rm", "-r", "doomed").returncode == 0  # the replayed command works
    assert run(work, "ls", "made").returncode != 0


@pytest.mark.parametrize("how", PATHS)
def test_ignored_files_are_restored_with_their_bytes_and_later_ones_removed(
    sandbox: GitWorktreeSandbox, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = sandbox.workdir
    (work / "build" / "obj").mkdir(parents=True)
    (work / "build" / "obj" / "a.o").write_bytes(b"\x7fELF\x00\x01")
    (work / "build" / "tool").symlink_to("/usr/bin/env")  # git keeps any link target
    (work / "src" / "kept.log").write_bytes(b"at the target\n")
    (work / "src" / "kept.log").chmod(0o600)
    target = sandbox.checkpoint()
    at_target = state(work)
    (work / "src" / "kept.log").write_bytes(b"rewritten after the target\n")
    (work / "src" / "kept.log").chmod(0o644)
    (work / "build" / "obj" / "a.o").unlink()
    (work / "build" / "obj" / "b.o").write_bytes(b"written after the target")
    (work / "later.log").write_text("written after the target\n")
    (work / "build" / "tool").unlink()
    roll_back(sandbox, target, how, monkeypatch)
    assert state(work) == at_target
    assert run(work, "ls", "later.log").returncode != 0  # a replayed command cannot see it
    assert (work / "build" / "obj" / "a.o").read_bytes() == b"\x7fELF\x00\x01"


@pytest.mark.parametrize("how", PATHS)
def test_a_folder_of_ignored_files_made_after_the_target_is_removed(
    sandbox: GitWorktreeSandbox, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = sandbox.workdir
    target = sandbox.checkpoint()
    at_target = state(work)
    (work / "build" / "deep" / "er").mkdir(parents=True)
    (work / "build" / "deep" / "er" / "x.bin").write_bytes(bytes(range(256)))
    (work / "src" / "debug.log").write_text("log\n")
    roll_back(sandbox, target, how, monkeypatch)
    assert state(work) == at_target
    assert run(work, "ls", "build").returncode != 0


@pytest.mark.parametrize("how", PATHS)
def test_permission_bits_are_restored(
    sandbox: GitWorktreeSandbox, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = sandbox.workdir
    (work / "secret.txt").write_text("secret\n")
    (work / "secret.txt").chmod(0o600)
    (work / "README.md").chmod(0o644)
    (work / "run.sh").chmod(0o755)
    (work / "src").chmod(0o750)
    target = sandbox.checkpoint()
    at_target = state(work)
    (work / "secret.txt").chmod(0o644)  # git keeps only the x bit: these look unchanged
    (work / "README.md").chmod(0o600)
    (work / "run.sh").chmod(0o700)
    (work / "src").chmod(0o755)
    roll_back(sandbox, target, how, monkeypatch)
    assert state(work) == at_target
    assert (mode(work / "secret.txt"), mode(work / "README.md"), mode(work / "run.sh")) == (
        0o600,
        0o644,
        0o755,
    )
    assert mode(work / "src") == 0o750


@pytest.mark.parametrize("how", PATHS)
def test_bits_of_files_git_rewrites_are_those_of_the_target(
    sandbox: GitWorktreeSandbox, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git writes a file it restores with the umask's bits; the record puts 600 back."""
    work = sandbox.workdir
    (work / "secret.txt").write_text("first\n")
    (work / "secret.txt").chmod(0o600)
    (work / "new" / "dir").mkdir(parents=True)
    (work / "new" / "dir" / "f.txt").write_text("in a new folder\n")
    (work / "new").chmod(0o700)
    target = sandbox.checkpoint()
    at_target = state(work)
    (work / "secret.txt").unlink()
    (work / "new" / "dir" / "f.txt").unlink()
    (work / "new" / "dir").rmdir()
    (work / "new").rmdir()
    sandbox.checkpoint()
    roll_back(sandbox, target, how, monkeypatch)
    assert state(work) == at_target


@pytest.mark.parametrize("how", PATHS)
def test_files_git_rewrites_in_place_get_the_bits_of_the_target_under_any_umask(
    sandbox: GitWorktreeSandbox, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files both checkpoints hold, with new content: git writes each anew with its own
    bits less the umask. Rolled back under the umask the worktree was made with, and under
    another (002: git's bits are then 664, not the 644 of the baseline), each file gets the
    bits it had at the target, 600 ones too."""
    work = sandbox.workdir
    (work / "secret.txt").write_text("first\n")
    (work / "secret.txt").chmod(0o600)
    target = sandbox.checkpoint()
    at_target = state(work)
    (work / "README.md").write_text("# changed\n")
    (work / "src" / "app.py").write_text("print('changed')\n")
    (work / "run.sh").write_text("#!/bin/sh\necho changed\n")
    (work / "secret.txt").write_text("second\n")
    later = sandbox.checkpoint()
    at_later = state(work)
    for umask in (0o022, 0o002):
        old = os.umask(umask)
        try:
            roll_back(sandbox, target, how, monkeypatch)
            assert state(work) == at_target
            roll_back(sandbox, later, how, monkeypatch)
            assert state(work) == at_later
        finally:
            os.umask(old)


@pytest.mark.parametrize("how", PATHS)
def test_symlinks_stay_exact(
    sandbox: GitWorktreeSandbox, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = sandbox.workdir
    (work / "abs").symlink_to("/etc/hostname")
    (work / "dir-link").symlink_to("src")
    (work / "dangling").symlink_to("no/such/file")
    target = sandbox.checkpoint()
    at_target = state(work)
    (work / "link").unlink()
    (work / "link").symlink_to("README.md")
    (work / "dir-link").unlink()
    (work / "dir-link").mkdir()  # a link becomes an empty folder
    (work / "dangling").unlink()
    (work / "new-link").symlink_to("../outside")
    roll_back(sandbox, target, how, monkeypatch)
    assert state(work) == at_target


@pytest.mark.parametrize("how", PATHS)
def test_rolling_forward_brings_everything_back(
    sandbox: GitWorktreeSandbox, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = sandbox.workdir
    base = sandbox.checkpoint()
    at_base = state(work)
    (work / "empty").mkdir()
    (work / "build").mkdir()
    (work / "build" / "out").write_bytes(b"\x00" * 100)
    (work / "README.md").chmod(0o600)
    (work / "src").chmod(0o700)
    later = sandbox.checkpoint()
    at_later = state(work)
    roll_back(sandbox, base, how, monkeypatch)
    assert state(work) == at_base
    roll_back(sandbox, later, how, monkeypatch)
    assert state(work) == at_later


def test_another_process_rolls_back_from_the_stored_records(
    sandbox: GitWorktreeSandbox, resource: Resource, tmp_path: Path
) -> None:
    work = sandbox.workdir
    (work / "empty").mkdir()
    (work / "kept.log").write_text("kept\n")
    (work / "README.md").chmod(0o600)
    target = sandbox.checkpoint()
    at_target = state(work)
    (work / "empty").rmdir()
    (work / "kept.log").unlink()
    (work / "README.md").chmod(0o644)
    (work / "new.log").write_text("new\n")
    safety = sandbox.checkpoint()
    other = GitWorktreeStrategy().open(resource, PLAN, tmp_path / "sandboxes" / "plan")
    other.verify(target)
    other.rollback(target, current=safety)
    assert state(work) == at_target


def test_dropping_a_checkpoint_keeps_what_the_others_need(
    sandbox: GitWorktreeSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = sandbox.workdir
    (work / "a.log").write_bytes(b"kept by the first checkpoint\n")
    first = sandbox.checkpoint()
    at_first = state(work)
    (work / "a.log").write_bytes(b"only the second has this\n")
    second = sandbox.checkpoint()
    sandbox.drop_checkpoint(second)
    (work / "a.log").write_bytes(b"third\n")
    sandbox.checkpoint()
    roll_back(sandbox, first, "full", monkeypatch)
    assert state(work) == at_first
    sandbox.verify(first)


def test_apply_lands_git_content_only(sandbox: GitWorktreeSandbox, resource: Resource) -> None:
    """The applied branch is a git commit: no ignored file, no empty folder, only the x bit."""
    work = sandbox.workdir
    (work / "empty").mkdir()
    (work / "out.log").write_text("ignored\n")
    (work / "secret.txt").write_text("secret\n")
    (work / "secret.txt").chmod(0o600)
    sandbox.checkpoint()
    result = sandbox.apply()
    assert [change.path for change in result.changes] == ["secret.txt"]
    repo = Path(resource.location)
    listed = git(repo, "ls-tree", "-r", f"cleveragents/apply/{PLAN}").splitlines()
    assert [line.split("\t")[1] for line in listed if line.startswith("100644")] == [
        ".gitignore",
        "README.md",
        "secret.txt",
        "src/app.py",
    ]


@pytest.mark.parametrize("how", PATHS)
def test_a_read_only_folder_is_emptied_of_later_files_and_stays_read_only(
    sandbox: GitWorktreeSandbox, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = sandbox.workdir
    (work / "ro").mkdir()
    (work / "ro" / "kept.txt").write_text("kept\n")
    (work / "ro" / "cache").mkdir()
    (work / "ro" / "cache" / "x.log").write_text("ignored, kept\n")
    (work / "ro" / "cache").chmod(0o500)
    (work / "ro").chmod(0o555)
    target = sandbox.checkpoint()
    at_target = state(work)
    (work / "ro").chmod(0o755)
    (work / "ro" / "cache").chmod(0o700)
    (work / "ro" / "later.txt").write_text("later\n")
    (work / "ro" / "cache" / "x.log").unlink()
    (work / "ro" / "cache" / "y.log").write_text("later\n")
    try:
        roll_back(sandbox, target, how, monkeypatch)
        assert state(work) == at_target
    finally:
        (work / "ro").chmod(0o755)
        (work / "ro" / "cache").chmod(0o755)


@pytest.mark.parametrize("how", PATHS)
def test_ignore_rules_that_change_move_files_between_git_and_the_record(
    sandbox: GitWorktreeSandbox, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``build/`` ignored at the target, tracked after a .gitignore edit, and back."""
    work = sandbox.workdir
    (work / "build").mkdir()
    (work / "build" / "out.bin").write_bytes(b"\x01\x02")
    (work / "build" / "empty").mkdir()
    target = sandbox.checkpoint()
    at_target = state(work)
    (work / ".gitignore").write_text("*.log\n")  # build/ is no longer ignored
    (work / "build" / "out.bin").write_bytes(b"tracked now")
    (work / "build" / "more.txt").write_text("more\n")
    (work / "notes.log").write_text("still ignored\n")
    later = sandbox.checkpoint()
    at_later = state(work)
    assert sandbox.read(later, "build/out.bin") == b"tracked now"
    roll_back(sandbox, target, how, monkeypatch)
    assert state(work) == at_target
    roll_back(sandbox, later, how, monkeypatch)
    assert state(work) == at_later
