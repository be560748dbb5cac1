"""The git_worktree sandbox against a real git repository (created in tmp_path).

The user's repository has nested folders, binary files, an executable, symlinks, an ignored
file, a second branch, and uncommitted work of its own (a modified file, a staged file, an
untracked file). ``UserCheckout.check()`` proves after every operation that the user's HEAD,
index file (byte for byte), status, branches and working tree are exactly as before.
"""

from __future__ import annotations

import gc
import os
import shlex
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from cleveragents_tui import failpoints
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    ChangeKind,
    CheckpointMissingError,
    Sandbox,
    SandboxError,
    SandboxStrategy,
)
from cleveragents_tui.sandbox.git import GitWorktreeSandbox, GitWorktreeStrategy, worktree
from cleveragents_tui.sandbox.safety import UnsafeInputError

PLAN = "01HXPLAN0000000000000000AA"
BINARY = bytes(range(256)) * 8 + b"\x00\xff"

Snapshot = dict[str, tuple[str, int, bytes]]


def git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, check=True, env=env or os.environ.copy()
    )
    return done.stdout.decode()


def snapshot(root: Path) -> Snapshot:
    """Every file and symlink under ``root`` (not .git): kind, permission bits, bytes."""
    found: Snapshot = {}
    for folder, dirnames, filenames in os.walk(root):
        here = Path(folder)
        if here == root:
            dirnames[:] = [d for d in dirnames if d != ".git"]
            filenames = [f for f in filenames if f != ".git"]
        for name in [*dirnames, *filenames]:
            path = here / name
            relative = path.relative_to(root).as_posix()
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[relative] = ("link", 0, os.readlink(path).encode())
            elif stat.S_ISREG(info.st_mode):
                found[relative] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
    return found


class UserCheckout:
    """The user's repository state that no sandbox operation may change."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self.before = self.state()

    def state(self) -> dict[str, object]:
        index = (self.repo / ".git" / "index").read_bytes()  # read before any git command
        quiet = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # status must not refresh the index
        branches = [
            line
            for line in git(
                self.repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads"
            ).splitlines()
            if not line.startswith("refs/heads/cleveragents/")
        ]
        return {
            "index": index,
            "head": git(self.repo, "symbolic-ref", "HEAD") + git(self.repo, "rev-parse", "HEAD"),
            "status": git(self.repo, "status", "--porcelain", "--untracked-files=all", env=quiet),
            "branches": branches,
            "files": snapshot(self.repo),
        }

    def check(self) -> None:
        assert self.state() == self.before


@pytest.fixture(autouse=True)
def isolated_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """No machine-wide or personal git configuration leaks into these tests."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for key, value in {"NAME": "User", "EMAIL": "user@example.com"}.items():
        monkeypatch.setenv(f"GIT_AUTHOR_{key}", value)
        monkeypatch.setenv(f"GIT_COMMITTER_{key}", value)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src" / "pkg" / "deep").mkdir(parents=True)
    (repo / "assets").mkdir()
    (repo / "bin").mkdir()
    (repo / "README.md").write_text("# demo\n")
    (repo / ".gitignore").write_text("*.log\nbuild/\n")
    (repo / "src" / "pkg" / "mod.py").write_text("def f():\n    return 1\n")
    (repo / "src" / "pkg" / "deep" / "data.json").write_text('{"a": [1, 2, 3]}\n')
    (repo / "assets" / "logo.bin").write_bytes(BINARY)
    (repo / "bin" / "run.sh").write_text("#!/bin/sh\necho run\n")
    (repo / "bin" / "run.sh").chmod(0o755)
    (repo / "link.py").symlink_to("src/pkg/mod.py")
    (repo / "dangling").symlink_to("nowhere/at/all")
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    git(repo, "branch", "feature")
    # The user's own work in progress, which the sandbox must neither see nor touch.
    (repo / "README.md").write_text("# demo, edited by the user\n")
    (repo / "staged.txt").write_text("staged by the user\n")
    git(repo, "add", "staged.txt")
    (repo / "notes.txt").write_text("untracked notes\n")
    (repo / "debug.log").write_text("ignored\n")
    return repo


@pytest.fixture
def resource(repo: Path) -> Resource:
    return Resource(
        resource_id="local/demo-repo",
        kind="git",
        location=str(repo),
        sandbox_strategy=SandboxStrategyName.GIT_WORKTREE,
    )


@pytest.fixture
def user(repo: Path) -> UserCheckout:
    return UserCheckout(repo)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sandboxes" / "plan-1"


@pytest.fixture
def sandbox(resource: Resource, root: Path, user: UserCheckout) -> GitWorktreeSandbox:
    made = GitWorktreeStrategy().create(resource, PLAN, root)
    user.check()
    return made


def committed_files(repo: Path) -> Snapshot:
    """What the user's HEAD commit holds (the sandbox's starting point)."""
    clone = repo.parent / "head-export"
    git(repo, "worktree", "add", "--detach", "--quiet", str(clone), "HEAD")
    try:
        return snapshot(clone)
    finally:
        git(repo, "worktree", "remove", "--force", str(clone))


def refs(repo: Path, prefix: str) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname)", prefix).split()


def scribble(workdir: Path) -> None:
    """Modify, add (also in a new folder), delete, chmod both ways, retarget a symlink."""
    (workdir / "src" / "pkg" / "mod.py").write_text("def f():\n    return 2\n")
    (workdir / "assets" / "logo.bin").write_bytes(BINARY[::-1])
    (workdir / "new.txt").write_text("new\n")
    (workdir / "fresh" / "dir").mkdir(parents=True)
    (workdir / "fresh" / "dir" / "x.bin").write_bytes(b"\x00\x01\x02")
    (workdir / "src" / "pkg" / "deep" / "data.json").unlink()
    (workdir / "bin" / "run.sh").chmod(0o644)
    (workdir / "README.md").chmod(0o755)
    (workdir / "link.py").unlink()
    (workdir / "link.py").symlink_to("README.md")


# --------------------------------------------------------------------------- the basics


def test_strategy_and_sandbox_satisfy_the_protocols(sandbox: GitWorktreeSandbox) -> None:
    strategy: SandboxStrategy = GitWorktreeStrategy()
    assert strategy.name is SandboxStrategyName.GIT_WORKTREE
    assert isinstance(sandbox, Sandbox)
    assert sandbox.resource.resource_id == "local/demo-repo"


def test_create_checks_out_the_head_commit_on_a_branch_of_ours(
    sandbox: GitWorktreeSandbox, repo: Path, root: Path
) -> None:
    assert sandbox.workdir == root.resolve() / "worktree"
    assert snapshot(sandbox.workdir) == committed_files(repo)
    assert sandbox.base == git(repo, "rev-parse", "HEAD").strip()
    assert sandbox.branch == f"refs/heads/cleveragents/{PLAN}"
    assert git(sandbox.workdir, "symbolic-ref", "HEAD").strip() == sandbox.branch
    assert "notes.txt" not in snapshot(sandbox.workdir)  # the user's uncommitted work stays home


def test_checkpoint_is_a_full_sha_kept_alive_by_a_ref(
    sandbox: GitWorktreeSandbox, repo: Path, user: UserCheckout
) -> None:
    ref = sandbox.checkpoint()
    user.check()
    assert len(ref) == 40
    assert refs(repo, f"refs/cleveragents/{PLAN}/checkpoints/") == [
        f"refs/cleveragents/{PLAN}/checkpoints/{ref}"
    ]
    assert git(repo, "rev-parse", sandbox.branch).strip() == ref
    sandbox.verify(ref)


# ---------------------------------------------------------------------------- rollback


def test_rollback_restores_the_checkpoint_byte_for_byte(
    sandbox: GitWorktreeSandbox, user: UserCheckout
) -> None:
    before = snapshot(sandbox.workdir)
    ref = sandbox.checkpoint()
    scribble(sandbox.workdir)
    (sandbox.workdir / "empty" / "folder").mkdir(parents=True)
    assert snapshot(sandbox.workdir) != before
    sandbox.rollback(ref)
    user.check()
    assert snapshot(sandbox.workdir) == before
    assert not (sandbox.workdir / "fresh").exists()  # new folders go too, even empty ones
    assert not (sandbox.workdir / "empty").exists()


def test_rollback_across_several_checkpoints(
    sandbox: GitWorktreeSandbox, user: UserCheckout
) -> None:
    states, refs_made = [], []
    for step in range(3):
        (sandbox.workdir / f"step{step}.txt").write_text(f"step {step}\n")
        (sandbox.workdir / "README.md").write_text(f"readme at step {step}\n")
        if step == 1:
            scribble(sandbox.workdir)
        states.append(snapshot(sandbox.workdir))
        refs_made.append(sandbox.checkpoint())
    (sandbox.workdir / "after.txt").write_text("not checkpointed\n")
    for index in (0, 2, 1, 0, 2):
        sandbox.rollback(refs_made[index])
        assert snapshot(sandbox.workdir) == states[index]
    user.check()


def test_checkpoint_after_rollback_continues_from_the_rolled_back_state(
    sandbox: GitWorktreeSandbox, repo: Path
) -> None:
    first = sandbox.checkpoint()
    (sandbox.workdir / "a.txt").write_text("attempt 1\n")
    attempt1 = sandbox.checkpoint()
    sandbox.rollback(first)
    (sandbox.workdir / "a.txt").write_text("attempt 1\n")
    replay = sandbox.checkpoint()  # same state on the same parent: still its own checkpoint
    assert replay != attempt1
    sandbox.rollback(first)
    (sandbox.workdir / "a.txt").write_text("attempt 2\n")
    attempt2 = sandbox.checkpoint()
    assert git(repo, "rev-parse", f"{attempt2}^").strip() == first
    assert sandbox.read(attempt1, "a.txt") == b"attempt 1\n"  # the old attempt stays diffable
    assert sandbox.read(attempt2, "a.txt") == b"attempt 2\n"
    assert [c.kind for c in sandbox.diff(attempt1, attempt2)] == [ChangeKind.MODIFIED]
    sandbox.drop_checkpoint(replay)  # dropping one never takes another with it
    sandbox.verify(attempt1)
    sandbox.verify(attempt2)


def test_rollback_handles_files_folders_and_symlinks_swapping_places(
    sandbox: GitWorktreeSandbox, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("must survive\n")
    before = snapshot(sandbox.workdir)
    ref = sandbox.checkpoint()
    work = sandbox.workdir
    (work / "src" / "pkg" / "deep" / "data.json").unlink()
    (work / "src" / "pkg" / "deep").rmdir()
    (work / "src" / "pkg" / "deep").write_text("a file where a folder was\n")
    (work / "README.md").unlink()
    (work / "README.md").mkdir()
    (work / "README.md" / "inside.txt").write_text("a folder where a file was\n")
    for child in (work / "assets").iterdir():
        child.unlink()
    (work / "assets").rmdir()
    (work / "assets").symlink_to(outside)  # a folder replaced by a symlink leading out
    swapped = sandbox.checkpoint()
    assert sandbox.read(swapped, "src/pkg/deep") == b"a file where a folder was\n"
    sandbox.rollback(ref)
    assert snapshot(sandbox.workdir) == before
    assert (outside / "precious").read_text() == "must survive\n"
    sandbox.rollback(swapped)
    assert (work / "assets").is_symlink()
    assert (work / "README.md" / "inside.txt").is_file()
    sandbox.rollback(ref)
    assert snapshot(sandbox.workdir) == before
    assert sorted(p.name for p in outside.iterdir()) == ["precious"]


ODD_NAMES = [
    "with space.txt",
    "ünïcødé.txt",
    "-rf",
    "--upload-pack=touch x",
    'quo"te',
    "tab\tname",
    "star*?[a].txt",
    ":(glob)**",
    "back\\slash",
    "line\nbreak",
]


def test_unusual_file_names_round_trip(sandbox: GitWorktreeSandbox, user: UserCheckout) -> None:
    odd = sandbox.workdir / "odd"
    odd.mkdir()
    for name in ODD_NAMES:
        (odd / name).write_bytes(name.encode())
    state = snapshot(sandbox.workdir)
    ref = sandbox.checkpoint()
    assert sorted(c.path for c in sandbox.diff(sandbox.base, ref)) == sorted(
        f"odd/{name}" for name in ODD_NAMES
    )
    for name in ODD_NAMES:  # read() refuses a backslash (not a path separator anywhere)
        if "\\" not in name:
            assert sandbox.read(ref, f"odd/{name}") == name.encode()
    assert sandbox.read(ref, "odd/line") is None  # a line break is no separator
    shutil.rmtree(odd)
    sandbox.rollback(ref)
    assert snapshot(sandbox.workdir) == state
    sandbox.rollback(sandbox.base)
    assert not odd.exists()
    user.check()


def test_a_submodule_entry_is_kept_as_it_is(repo: Path, resource: Resource, root: Path) -> None:
    commit = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},vendor/sub")
    git(repo, "commit", "-q", "-m", "add a submodule entry")
    user = UserCheckout(repo)  # after the user's commit
    sandbox = GitWorktreeStrategy().create(resource, PLAN, root)
    assert (sandbox.workdir / "vendor" / "sub").is_dir()  # not initialised: an empty folder
    ref = sandbox.checkpoint()
    (sandbox.workdir / "a.txt").write_text("a\n")
    assert [c.path for c in sandbox.changes_since_baseline()] == ["a.txt"]
    sandbox.rollback(ref)
    assert sandbox.apply().changes == ()
    (sandbox.workdir / "a.txt").write_text("a\n")
    assert [c.path for c in sandbox.apply().changes] == ["a.txt"]
    tip = git(repo, "rev-parse", f"cleveragents/apply/{PLAN}").strip()
    assert git(repo, "ls-tree", tip, "vendor/sub").startswith(f"160000 commit {commit}")
    user.check()


def test_ignored_files_are_kept_beside_the_commit_not_in_it(sandbox: GitWorktreeSandbox) -> None:
    """Ignored files are no part of the checkpoint's commit (nor of diffs, reads or Apply),
    but the record beside it: a rollback removes those made since and brings back the rest
    (tests/sandbox/test_git_blind_spots.py has the rest)."""
    ref = sandbox.checkpoint()
    (sandbox.workdir / "build").mkdir()
    (sandbox.workdir / "build" / "out.o").write_bytes(b"\x7fELF")
    (sandbox.workdir / "run.log").write_text("log\n")
    later = sandbox.checkpoint()
    assert sandbox.read(later, "run.log") is None
    assert sandbox.diff(ref, later) == []
    sandbox.rollback(ref)
    assert not (sandbox.workdir / "run.log").exists()
    assert not (sandbox.workdir / "build").exists()
    sandbox.rollback(later)
    assert (sandbox.workdir / "run.log").read_text() == "log\n"
    assert (sandbox.workdir / "build" / "out.o").read_bytes() == b"\x7fELF"


def test_rollback_to_the_base(sandbox: GitWorktreeSandbox, repo: Path) -> None:
    scribble(sandbox.workdir)
    sandbox.checkpoint()
    sandbox.verify(sandbox.base)
    sandbox.rollback(sandbox.base)
    assert snapshot(sandbox.workdir) == committed_files(repo)
    assert sandbox.changes_since_baseline() == []


# ------------------------------------------------ rollback: every kind of change, both ways


def folders(root: Path) -> set[str]:
    """Every real folder under ``root`` (not .git, not links to folders), empty ones too."""
    return {
        (Path(folder) / name).relative_to(root).as_posix()
        for folder, dirnames, _ in os.walk(root)
        for name in dirnames
        if not (Path(folder) == root and name == ".git")
        and stat.S_ISDIR((Path(folder) / name).lstat().st_mode)
    }


def parents(files: Snapshot) -> set[str]:
    """The folders that hold ``files``: after a rollback, exactly the folders there are."""
    return {path.rsplit("/", depth)[0] for path in files for depth in range(1, path.count("/") + 1)}


def assert_consistent(sandbox: GitWorktreeSandbox, ref: str) -> None:
    """HEAD is our branch at ``ref``, and index, HEAD and files agree (nothing untracked)."""
    work = sandbox.workdir
    assert git(work, "symbolic-ref", "HEAD").strip() == sandbox.branch
    assert git(work, "rev-parse", "HEAD").strip() == ref
    assert git(work, "status", "--porcelain=v1", "-z", "--untracked-files=all") == ""


def swap_file_and_folder(work: Path) -> None:
    (work / "src" / "pkg" / "deep" / "data.json").unlink()
    (work / "src" / "pkg" / "deep").rmdir()
    (work / "src" / "pkg" / "deep").write_text("a file where a folder was\n")
    (work / "README.md").unlink()
    (work / "README.md").mkdir()
    (work / "README.md" / "nested" / "more").mkdir(parents=True)
    (work / "README.md" / "nested" / "more" / "x.txt").write_text("deep inside\n")


def swap_links(work: Path) -> None:
    (work / "link.py").unlink()
    (work / "link.py").symlink_to("README.md")  # retargeted
    (work / "dangling").unlink()
    (work / "dangling").write_text("a file where a dangling link was\n")
    (work / "assets" / "logo.bin").unlink()
    (work / "assets" / "logo.bin").symlink_to("../bin")  # a file becomes a link to a folder
    (work / "bin-link").symlink_to("bin")


def delete_and_add_back(work: Path) -> None:
    (work / "src" / "pkg" / "mod.py").unlink()
    (work / "src" / "pkg" / "mod.py").write_text("def f():\n    return 1\n")  # same bytes
    (work / "bin" / "run.sh").unlink()
    (work / "bin" / "run.sh").write_text("#!/bin/sh\necho other\n")  # other bytes, not +x
    (work / "assets" / "logo.bin").unlink()
    (work / "assets").rmdir()
    (work / "assets").mkdir()
    (work / "assets" / "logo.bin").write_bytes(BINARY)


def nested_new_folders(work: Path) -> None:
    deep = work / "new" / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "leaf.txt").write_text("leaf\n")
    (work / "new" / "a" / "side.bin").write_bytes(b"\x00\x01")
    (work / "src" / "pkg" / "deep" / "deeper" / "deepest").mkdir(parents=True)
    (work / "src" / "pkg" / "deep" / "deeper" / "deepest" / "x.txt").write_text("x\n")
    (work / "empty" / "nothing" / "here").mkdir(parents=True)


def odd_names(work: Path) -> None:
    odd = work / "odd dir" / "-sub"
    odd.mkdir(parents=True)
    for name in ODD_NAMES:
        (odd / name).write_bytes(name.encode())
    (work / "--leading").write_text("dashes\n")
    (work / "new\nline").mkdir()
    (work / "new\nline" / "in folder.txt").write_text("x\n")
    (work / "README.md").rename(work / "READ ME.md")


def edit_what_target_and_tip_share(work: Path) -> None:
    """Changes the tip→target diff knows nothing of (the files are the same in both)."""
    (work / "src" / "pkg" / "deep" / "data.json").write_text("{}\n")
    (work / "bin" / "run.sh").chmod(0o644)  # git keeps the executable bit, not the rest
    (work / "stray.txt").write_text("untracked\n")


def stage_without_checkpoint(work: Path) -> None:
    (work / "staged.py").write_text("x = 1\n")
    (work / "README.md").write_text("staged edit\n")
    git(work, "add", "staged.py", "README.md")
    (work / "README.md").write_text("and edited again\n")
    git(work, "rm", "-q", "--cached", "src/pkg/mod.py")


def ignore_rules_change(work: Path) -> None:
    (work / ".gitignore").write_text("*.log\nbuild/\n*.tmp\n")
    (work / "scratch.tmp").write_text("ignored now, not at the target\n")
    (work / "kept.log").write_text("ignored at both\n")


def flip_modes(work: Path) -> None:
    (work / "README.md").chmod(0o755)
    (work / "bin" / "run.sh").chmod(0o644)


EDITS: dict[str, Callable[[Path], None]] = {
    "mode only, both ways": flip_modes,
    "files and folders swap places": swap_file_and_folder,
    "symlinks retargeted and retyped": swap_links,
    "deleted then added back": delete_and_add_back,
    "untracked files in nested new folders": nested_new_folders,
    "spaces, line breaks, leading dashes": odd_names,
    "edits to what target and tip share": edit_what_target_and_tip_share,
    "staged in the sandbox, not checkpointed": stage_without_checkpoint,
    "ignore rules change": ignore_rules_change,
    "everything at once": scribble,
}


# How the rollback learns the state it starts from: not at all (the edits were never
# checkpointed), not at all although they were, or from the checkpoint just taken, as the
# rollback protocol's safety checkpoint is (only the paths the two trees differ in change).
HOW = ["uncheckpointed", "checkpointed", "from the safety checkpoint"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_rollback_undoes_every_kind_of_change(
    sandbox: GitWorktreeSandbox, user: UserCheckout, edit: str, how: str
) -> None:
    work = sandbox.workdir
    (work / "build").mkdir()
    (work / "build" / "out.o").write_bytes(b"ignored, never touched")
    (work / "debug.log").write_text("ignored\n")
    target = sandbox.checkpoint()
    before, folders_before = snapshot(work), folders(work)
    EDITS[edit](work)
    after, folders_after = snapshot(work), folders(work)
    assert after != before or folders_after != folders_before
    later = sandbox.checkpoint() if how != "uncheckpointed" else None
    fresh = how == "from the safety checkpoint"
    sandbox.rollback(target, current=later if fresh else None)
    assert snapshot(work) == before  # ignored files too: made since are gone, others kept
    assert folders(work) == folders_before  # new folders gone, even empty ones
    assert_consistent(sandbox, target)
    if later is not None:  # and forward again, over the same paths the other way
        sandbox.rollback(later, current=target if fresh else None)
        assert snapshot(work) == after
        assert folders(work) == folders_after  # empty ones back too
        assert_consistent(sandbox, later)
    user.check()


def only_git(monkeypatch: pytest.MonkeyPatch, *refused: str) -> None:
    """Make the named git commands fail (an injected fault) for the rest of the test."""
    monkeypatch.setenv(failpoints.ENV_VAR, ",".join(f"git.call@{name}" for name in refused))
    failpoints.reset()


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_correction_in_another_process_rolls_back_exactly_without_a_scan(
    resource: Resource, root: Path, user: UserCheckout, edit: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the engine runs it: the plan's process takes two decisions' checkpoints, asking for
    the worktree before each write; a correction opens the sandbox anew, takes the safety
    checkpoint (no ``git status``: nobody was handed the worktree since) and rolls back."""
    running = GitWorktreeStrategy().create(resource, PLAN, root)
    running.track_handouts()
    work = running.workdir
    (work / "build").mkdir()
    (work / "build" / "out.o").write_bytes(b"ignored, never touched")
    target = running.checkpoint()
    before, folders_before = snapshot(work), folders(work)
    EDITS[edit](running.workdir)
    decision = running.checkpoint()
    after, folders_after = snapshot(work), folders(work)
    del running
    gc.collect()

    correcting = GitWorktreeStrategy().open(resource, PLAN, root)
    correcting.track_handouts()
    only_git(monkeypatch, "status")  # a scan would fail: the safety checkpoint needs none
    safety = correcting.checkpoint()
    assert correcting.diff(decision, safety) == []
    correcting.rollback(target, current=safety)
    assert (snapshot(work), folders(work)) == (before, folders_before)
    assert_consistent(correcting, target)
    correcting.rollback(safety, current=target)  # and undone, as a failed group would
    assert (snapshot(work), folders(work)) == (after, folders_after)
    assert_consistent(correcting, safety)
    user.check()


def test_a_write_after_the_worktree_was_handed_out_is_in_the_next_checkpoint(
    sandbox: GitWorktreeSandbox, root: Path, resource: Resource
) -> None:
    """Asking for the worktree withdraws the promise that nothing changed, in this process
    and in any other that opens the sandbox (the mark beside the worktree goes first)."""
    sandbox.track_handouts()
    first = sandbox.checkpoint()
    (sandbox.workdir / "README.md").write_text("written by a tool\n")
    other = GitWorktreeStrategy().open(resource, PLAN, root)
    other.track_handouts()
    safety = other.checkpoint()
    assert other.read(safety, "README.md") == b"written by a tool\n"
    other.rollback(first, current=safety)
    assert (other.workdir / "README.md").read_text() == "# demo\n"
    (sandbox.workdir / "new.txt").write_text("written after another process's rollback\n")
    assert sandbox.read(sandbox.checkpoint(), "new.txt") is not None


def test_rollback_from_the_safety_checkpoint_writes_only_what_differs(
    sandbox: GitWorktreeSandbox, user: UserCheckout, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = sandbox.workdir
    target = sandbox.checkpoint()
    before = snapshot(work)
    scribble(work)
    safety = sandbox.checkpoint()
    untouched = (work / ".gitignore").stat().st_ino
    only_git(monkeypatch, "checkout", "clean")  # neither the full rollback nor clean runs
    sandbox.rollback(target, current=safety)
    assert snapshot(work) == before
    assert (work / ".gitignore").stat().st_ino == untouched
    assert_consistent(sandbox, target)
    user.check()


def test_rollback_from_a_checkpoint_that_is_not_the_present_state_checks_everything(
    sandbox: GitWorktreeSandbox, user: UserCheckout, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ``current`` the object cannot vouch for is not trusted: an older checkpoint, or
    the index changed since (an agent's ``git add``); then every file is examined."""
    work = sandbox.workdir
    target = sandbox.checkpoint()
    before = snapshot(work)
    (work / "README.md").write_text("first\n")
    older = sandbox.checkpoint()
    (work / "README.md").write_text("second\n")
    (work / "staged.txt").write_text("added by the agent\n")
    newest = sandbox.checkpoint()
    (work / "src" / "pkg" / "deep" / "data.json").write_text("edited after the checkpoint\n")
    git(work, "add", "src/pkg/deep/data.json")
    only_git(monkeypatch, "read-tree")
    sandbox.rollback(target, current=newest)  # index changed since `newest`
    assert snapshot(work) == before
    assert_consistent(sandbox, target)
    sandbox.rollback(newest)
    (work / "src" / "pkg" / "deep" / "data.json").write_text("edited after the checkpoint\n")
    sandbox.rollback(target, current=older)  # not the last checkpoint
    assert snapshot(work) == before
    assert_consistent(sandbox, target)
    user.check()


def test_rollback_from_the_safety_checkpoint_falls_back_when_git_finds_an_edit(
    sandbox: GitWorktreeSandbox, user: UserCheckout
) -> None:
    """An edit after the safety checkpoint to a path the two checkpoints differ in makes
    ``read-tree`` refuse; the full rollback then runs and the result is still exact."""
    work = sandbox.workdir
    target = sandbox.checkpoint()
    before = snapshot(work)
    (work / "README.md").write_text("checkpointed\n")
    safety = sandbox.checkpoint()
    (work / "README.md").write_text("written after the safety checkpoint\n")
    sandbox.rollback(target, current=safety)
    assert snapshot(work) == before
    assert_consistent(sandbox, target)
    user.check()


def test_rollback_ends_an_unfinished_merge_of_the_agent(
    sandbox: GitWorktreeSandbox, user: UserCheckout
) -> None:
    work = sandbox.workdir
    target = sandbox.checkpoint()
    before = snapshot(work)
    (work / "README.md").write_text("ours\n")
    git(work, "commit", "-q", "-am", "ours")
    git(work, "checkout", "-q", "-b", "agent-side", target)
    (work / "README.md").write_text("theirs\n")
    git(work, "commit", "-q", "-am", "theirs")
    git(work, "checkout", "-q", sandbox.branch.removeprefix("refs/heads/"))
    merged = subprocess.run(["git", "merge", "agent-side"], cwd=work, capture_output=True)
    assert merged.returncode != 0  # a conflict: unmerged index entries, MERGE_HEAD
    sandbox.rollback(target)
    assert snapshot(work) == before
    assert_consistent(sandbox, target)
    assert not Path(git(work, "rev-parse", "--git-path", "MERGE_HEAD").strip()).exists()
    git(work, "branch", "-q", "-D", "agent-side")  # the agent's own branch, not ours to remove
    user.check()


# ---------------------------------------------------------------- diff, read, baseline


def test_diff_between_checkpoints_is_sorted_by_path(
    sandbox: GitWorktreeSandbox, user: UserCheckout
) -> None:
    old = sandbox.checkpoint()
    scribble(sandbox.workdir)
    new = sandbox.checkpoint()
    expected = [
        ("README.md", ChangeKind.MODIFIED),  # mode only
        ("assets/logo.bin", ChangeKind.MODIFIED),
        ("bin/run.sh", ChangeKind.MODIFIED),
        ("fresh/dir/x.bin", ChangeKind.ADDED),
        ("link.py", ChangeKind.MODIFIED),
        ("new.txt", ChangeKind.ADDED),
        ("src/pkg/deep/data.json", ChangeKind.DELETED),
        ("src/pkg/mod.py", ChangeKind.MODIFIED),
    ]
    assert [(c.path, c.kind) for c in sandbox.diff(old, new)] == expected
    assert [(c.path, c.kind) for c in sandbox.diff(new, old)][-2] == (
        "src/pkg/deep/data.json",
        ChangeKind.ADDED,
    )
    assert sandbox.diff(old, old) == []
    user.check()


def test_read_returns_content_at_a_checkpoint(sandbox: GitWorktreeSandbox) -> None:
    old = sandbox.checkpoint()
    scribble(sandbox.workdir)
    new = sandbox.checkpoint()
    assert sandbox.read(old, "assets/logo.bin") == BINARY
    assert sandbox.read(new, "assets/logo.bin") == BINARY[::-1]
    assert sandbox.read(old, "./src/pkg/mod.py") == b"def f():\n    return 1\n"
    assert sandbox.read(old, "new.txt") is None
    assert sandbox.read(new, "fresh/dir/x.bin") == b"\x00\x01\x02"
    assert sandbox.read(old, "link.py") == b"src/pkg/mod.py"  # a symlink reads as its target
    assert sandbox.read(old, "src") is None  # a folder is not content
    assert sandbox.read(sandbox.base, "README.md") == b"# demo\n"


def test_changes_since_baseline_include_work_not_yet_checkpointed(
    sandbox: GitWorktreeSandbox, user: UserCheckout
) -> None:
    assert sandbox.changes_since_baseline() == []
    (sandbox.workdir / "a.txt").write_text("checkpointed\n")
    sandbox.checkpoint()
    (sandbox.workdir / "b.txt").write_text("not yet\n")
    (sandbox.workdir / "README.md").unlink()
    (sandbox.workdir / "src" / "pkg" / "mod.py").write_text("changed\n")
    assert [(c.path, c.kind) for c in sandbox.changes_since_baseline()] == [
        ("README.md", ChangeKind.DELETED),
        ("a.txt", ChangeKind.ADDED),
        ("b.txt", ChangeKind.ADDED),
        ("src/pkg/mod.py", ChangeKind.MODIFIED),
    ]
    user.check()


# ------------------------------------------------------------------------------- apply


def test_apply_lands_one_commit_on_a_branch_and_leaves_the_user_alone(
    sandbox: GitWorktreeSandbox, repo: Path, user: UserCheckout
) -> None:
    first = sandbox.checkpoint()
    scribble(sandbox.workdir)
    sandbox.checkpoint()
    (sandbox.workdir / "late.txt").write_text("written after the last checkpoint\n")
    expected = [(c.path, c.kind) for c in sandbox.changes_since_baseline()]
    result = sandbox.apply()
    user.check()
    branch = f"cleveragents/apply/{PLAN}"
    assert branch in result.summary
    assert [(c.path, c.kind) for c in result.changes] == expected
    tip = git(repo, "rev-parse", branch).strip()
    assert git(repo, "rev-parse", f"{tip}^@").split() == [sandbox.base]  # one commit on base
    assert git(repo, "show", f"{tip}:late.txt") == "written after the last checkpoint\n"
    assert git(repo, "ls-tree", tip, "bin/run.sh").startswith("100644")
    assert sandbox.apply() == result  # a retried apply changes nothing
    user.check()
    sandbox.rollback(first)  # the sandbox itself keeps working
    assert sandbox.apply().changes != result.changes  # ...but the branch is not overwritten
    (sandbox.workdir / "other.txt").write_text("x\n")
    with pytest.raises(SandboxError, match="already exists"):
        sandbox.apply()
    assert git(repo, "rev-parse", branch).strip() == tip
    user.check()


def _commits(repo: Path) -> set[str]:
    """Every commit object in the repository, reachable or not."""
    listed = git(
        repo, "cat-file", "--batch-all-objects", "--batch-check=%(objecttype) %(objectname)"
    )
    return {line.split()[1] for line in listed.splitlines() if line.startswith("commit ")}


def test_apply_refuses_a_taken_branch_before_committing_and_names_the_fix(
    sandbox: GitWorktreeSandbox, repo: Path, user: UserCheckout
) -> None:
    """The apply branch made by someone else: Apply refuses without writing a commit, and
    its fix is a `git branch -D` that, pasted in a shell, deletes exactly that branch; then
    Apply lands."""
    branch = f"cleveragents/apply/{PLAN}"
    git(repo, "branch", branch)
    (sandbox.workdir / "a.txt").write_text("a\n")
    before = _commits(repo)
    with pytest.raises(SandboxError) as refused:
        sandbox.apply()
    assert _commits(repo) == before  # no commit object, not even a dangling one
    assert refused.value.problem.endswith(f"the branch {branch} already exists with other content")
    fix = refused.value.fix
    assert fix is not None and "\n" not in str(refused.value)
    delete = f"git -C {shlex.quote(str(repo.resolve()))} branch -D {branch}"
    assert f"({delete})" in fix
    subprocess.run(["sh", "-c", delete], check=True, capture_output=True)
    assert refs(repo, "refs/heads/cleveragents/apply/") == []
    assert branch in sandbox.apply().summary
    assert git(repo, "rev-parse", f"{branch}^").strip() == sandbox.base
    user.check()


def test_apply_without_changes_creates_no_branch(
    sandbox: GitWorktreeSandbox, repo: Path, user: UserCheckout
) -> None:
    result = sandbox.apply()
    assert result.changes == ()
    assert "nothing to apply" in result.summary
    assert refs(repo, "refs/heads/cleveragents/apply/") == []
    user.check()


# ----------------------------------------------------------------- discard and reopen


def test_discard_removes_the_worktree_and_our_refs_only(
    sandbox: GitWorktreeSandbox, repo: Path, user: UserCheckout
) -> None:
    (sandbox.workdir / "a.txt").write_text("a\n")
    sandbox.checkpoint()
    (sandbox.workdir / "b.log").write_text("ignored files go too\n")
    sandbox.apply()
    sandbox.discard()
    user.check()
    assert not sandbox.workdir.exists()
    assert refs(repo, f"refs/cleveragents/{PLAN}") == []
    assert refs(repo, f"refs/heads/cleveragents/{PLAN}") == []
    assert refs(repo, "refs/heads/cleveragents/apply/") == [f"refs/heads/cleveragents/apply/{PLAN}"]
    assert str(sandbox.workdir) not in git(repo, "worktree", "list")
    sandbox.discard()  # twice is fine
    with pytest.raises(SandboxError, match="discarded"):
        sandbox.checkpoint()


@pytest.mark.parametrize("damage", ["deleted", "tampered"])
def test_discard_copes_with_a_damaged_worktree(
    sandbox: GitWorktreeSandbox, repo: Path, user: UserCheckout, damage: str
) -> None:
    sandbox.checkpoint()
    if damage == "deleted":
        shutil.rmtree(sandbox.workdir)
    else:
        (sandbox.workdir / ".git").write_text("gitdir: /nowhere\n")
    sandbox.discard()
    assert not sandbox.workdir.exists()
    assert refs(repo, f"refs/cleveragents/{PLAN}") == []
    assert refs(repo, f"refs/heads/cleveragents/{PLAN}") == []
    assert git(repo, "worktree", "list").count("\n") == 1
    user.check()


def test_open_reopens_the_sandbox_from_another_object(
    sandbox: GitWorktreeSandbox, resource: Resource, root: Path, user: UserCheckout
) -> None:
    ref = sandbox.checkpoint()
    scribble(sandbox.workdir)
    state = snapshot(sandbox.workdir)
    later = sandbox.checkpoint()
    reopened = GitWorktreeStrategy().open(resource, PLAN, root)
    assert reopened.base == sandbox.base
    assert reopened.workdir == sandbox.workdir
    reopened.verify(ref)
    assert reopened.diff(ref, later) == sandbox.diff(ref, later)
    reopened.rollback(ref)
    sandbox.rollback(later)
    assert snapshot(reopened.workdir) == state
    user.check()


def test_open_without_a_sandbox_fails_clearly(
    resource: Resource, tmp_path: Path, user: UserCheckout
) -> None:
    with pytest.raises(SandboxError) as caught:
        GitWorktreeStrategy().open(resource, PLAN, tmp_path / "elsewhere")
    message = str(caught.value)
    assert "local/demo-repo" in message
    assert f"agents plan discard {PLAN}, then start the plan again" in message
    assert "\n" not in message
    user.check()


def test_creating_the_same_sandbox_twice_is_refused(
    sandbox: GitWorktreeSandbox, resource: Resource, root: Path, tmp_path: Path, user: UserCheckout
) -> None:
    with pytest.raises(SandboxError, match="already exists"):
        GitWorktreeStrategy().create(resource, PLAN, root)
    with pytest.raises(SandboxError, match="already exists"):
        GitWorktreeStrategy().create(resource, PLAN, tmp_path / "another-root")
    assert not (tmp_path / "another-root" / "worktree").exists()
    sandbox.checkpoint()  # the first one is unharmed
    user.check()


def git_children() -> list[int]:
    """Our own child processes running git (Linux /proc)."""
    found = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)
        except OSError:
            continue
        name = fields[0].split("(", 1)[1]
        if name == "git" and int(fields[1].split()[1]) == os.getpid():
            found.append(int(stat_file.parent.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_no_git_process_or_draft_outlives_the_sandbox_object(
    resource: Resource, root: Path, tmp_path: Path
) -> None:
    before = set(git_children())
    sandbox = GitWorktreeStrategy().create(resource, PLAN, root)
    sandbox.checkpoint()
    assert len(set(git_children()) - before) == 2  # update-ref --stdin, hash-object
    sandbox.discard()
    assert set(git_children()) - before == set()
    other = GitWorktreeStrategy().create(resource, "01HXPLAN0000000000000000BB", tmp_path / "r2")
    other.checkpoint()
    del other  # dropped without discard: the finalizer ends the processes
    gc.collect()
    assert set(git_children()) - before == set()
    assert sorted(p.name for p in (tmp_path / "r2").iterdir()) == ["blind-spots", "worktree"]


def test_a_failed_ref_update_does_not_break_the_next_one(
    sandbox: GitWorktreeSandbox, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (sandbox.workdir / "a.txt").write_text("a\n")
    sandbox.apply()
    (sandbox.workdir / "a.txt").write_text("b\n")
    # The branch taken after Apply looked (a race): the ref update itself refuses.
    monkeypatch.setattr(worktree, "branch_exists", lambda git, branch: False)
    with pytest.raises(SandboxError, match=r"git -C .* branch -D "):
        sandbox.apply()  # the long-running update-ref exits on this error...
    ref = sandbox.checkpoint()  # ...and the next request starts a new one
    sandbox.verify(ref)
    assert git(repo, "rev-parse", sandbox.branch).strip() == ref


# ------------------------------------------------------------- verify, drop, missing


def test_verify_raises_when_the_commit_object_is_missing(
    sandbox: GitWorktreeSandbox, repo: Path
) -> None:
    ref = sandbox.checkpoint()
    (sandbox.workdir / "a.txt").write_text("a\n")
    sandbox.checkpoint()
    (repo / ".git" / "objects" / ref[:2] / ref[2:]).unlink()
    before = snapshot(sandbox.workdir)
    with pytest.raises(CheckpointMissingError, match=ref):
        sandbox.verify(ref)
    with pytest.raises(CheckpointMissingError):
        sandbox.rollback(ref)
    with pytest.raises(CheckpointMissingError):
        sandbox.read(ref, "a.txt")
    with pytest.raises(CheckpointMissingError):
        sandbox.diff(ref, sandbox.base)
    with pytest.raises(CheckpointMissingError):
        sandbox.verify("1" * 40)
    assert snapshot(sandbox.workdir) == before


def test_drop_checkpoint_deletes_only_its_ref(sandbox: GitWorktreeSandbox, repo: Path) -> None:
    made = []
    for step in range(3):
        (sandbox.workdir / "f.txt").write_text(f"{step}\n")
        made.append(sandbox.checkpoint())
    sandbox.drop_checkpoint(made[1])
    with pytest.raises(CheckpointMissingError):
        sandbox.verify(made[1])
    sandbox.verify(made[0])
    sandbox.verify(made[2])
    sandbox.rollback(made[0])
    assert (sandbox.workdir / "f.txt").read_text() == "0\n"
    assert len(refs(repo, f"refs/cleveragents/{PLAN}/checkpoints/")) == 2
    sandbox.drop_checkpoint(made[1])  # already gone: nothing to do
    with pytest.raises(SandboxError, match="base"):
        sandbox.drop_checkpoint(sandbox.base)


# ----------------------------------------------------------------------------- safety


@pytest.mark.parametrize(
    "hostile",
    [
        "--upload-pack=touch /tmp/pwned",
        "-h",
        "HEAD",
        "main",
        "refs/heads/main",
        "0123456789abcdef",
        "0123456789ABCDEF0123456789ABCDEF01234567",
        "0123456789abcdef0123456789abcdef01234567\n",
        "0123456789abcdef0123456789abcdef01234567 ",
        "../../etc/passwd",
        "",
    ],
)
def test_hostile_references_are_refused_and_change_nothing(
    sandbox: GitWorktreeSandbox, repo: Path, user: UserCheckout, hostile: str
) -> None:
    ref = sandbox.checkpoint()
    (sandbox.workdir / "wip.txt").write_text("uncheckpointed work\n")
    before = snapshot(sandbox.workdir), refs(repo, "refs/")
    attempts: list[Callable[[], object]] = [
        lambda: sandbox.rollback(hostile),
        lambda: sandbox.verify(hostile),
        lambda: sandbox.diff(hostile, ref),
        lambda: sandbox.diff(ref, hostile),
        lambda: sandbox.read(hostile, "README.md"),
        lambda: sandbox.drop_checkpoint(hostile),
    ]
    for attempt in attempts:
        with pytest.raises(UnsafeInputError):
            attempt()
    assert (snapshot(sandbox.workdir), refs(repo, "refs/")) == before
    user.check()


@pytest.mark.parametrize(
    "path",
    ["../repo/README.md", "src/../../x", "/etc/passwd", ".git/config", "a\\b", "", "~/x"],
)
def test_read_refuses_paths_outside_the_tree(sandbox: GitWorktreeSandbox, path: str) -> None:
    ref = sandbox.checkpoint()
    with pytest.raises(UnsafeInputError):
        sandbox.read(ref, path)


@pytest.mark.parametrize(
    "plan_id", ["--force", "../up", "a/b", "x.lock", "a..b", "apply", "p\n", ""]
)
def test_hostile_plan_ids_are_refused(
    resource: Resource, root: Path, repo: Path, user: UserCheckout, plan_id: str
) -> None:
    strategy = GitWorktreeStrategy()
    with pytest.raises(UnsafeInputError):
        strategy.create(resource, plan_id, root)
    with pytest.raises(UnsafeInputError):
        strategy.open(resource, plan_id, root)
    assert not root.exists()
    assert refs(repo, "refs/cleveragents/") == []
    user.check()


def test_hooks_of_the_user_repository_never_run(
    resource: Resource, root: Path, repo: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "hook-ran"
    for hook in ("post-checkout", "reference-transaction", "pre-commit", "post-commit"):
        script = repo / ".git" / "hooks" / hook
        script.write_text(f"#!/bin/sh\necho {hook} >> '{marker}'\n")
        script.chmod(0o755)
    sandbox = GitWorktreeStrategy().create(resource, PLAN, root)
    ref = sandbox.checkpoint()
    scribble(sandbox.workdir)
    sandbox.checkpoint()
    sandbox.rollback(ref)
    sandbox.apply()
    sandbox.discard()
    assert not marker.exists()


def test_inherited_git_variables_cannot_redirect_it(
    resource: Resource, root: Path, repo: Path, user: UserCheckout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    sandbox = GitWorktreeStrategy().create(resource, PLAN, root)
    ref = sandbox.checkpoint()
    scribble(sandbox.workdir)
    sandbox.checkpoint()
    sandbox.rollback(ref)
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(key)
    user.check()


def test_a_rewritten_dot_git_file_in_the_sandbox_cannot_redirect_it(
    sandbox: GitWorktreeSandbox, repo: Path, user: UserCheckout
) -> None:
    ref = sandbox.checkpoint()
    (sandbox.workdir / ".git").write_text(f"gitdir: {repo / '.git'}\n")
    (sandbox.workdir / "new.txt").write_text("new\n")
    sandbox.checkpoint()
    sandbox.rollback(ref)
    assert not (sandbox.workdir / "new.txt").exists()
    user.check()


def test_an_agent_switching_branches_in_the_sandbox_does_not_lead_rollback_to_a_user_branch(
    sandbox: GitWorktreeSandbox, repo: Path, user: UserCheckout
) -> None:
    ref = sandbox.checkpoint()
    git(sandbox.workdir, "checkout", "-q", "feature")
    sandbox.rollback(ref)
    assert git(sandbox.workdir, "symbolic-ref", "HEAD").strip() == sandbox.branch
    user.check()  # "feature" still points where it did


def test_a_nested_repository_is_refused_with_a_clear_message(sandbox: GitWorktreeSandbox) -> None:
    ref = sandbox.checkpoint()
    nested = sandbox.workdir / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    with pytest.raises(SandboxError, match=r"nested git repository at 'vendor/lib/'.*\.gitignore"):
        sandbox.checkpoint()
    sandbox.rollback(ref)  # rollback removes it like any other new item
    assert not (sandbox.workdir / "vendor").exists()


# ---------------------------------------------------------------------- clear errors


def test_a_location_that_is_not_a_repository_fails_clearly(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for location, expected in (
        (plain, "not a usable git repository"),
        (tmp_path / "nope", "not a folder"),
    ):
        resource = Resource(
            resource_id="local/broken",
            kind="git",
            location=str(location),
            sandbox_strategy=SandboxStrategyName.GIT_WORKTREE,
        )
        with pytest.raises(SandboxError) as caught:
            GitWorktreeStrategy().create(resource, PLAN, tmp_path / "root")
        message = str(caught.value)
        assert expected in message
        assert "local/broken" in message
        assert "set the location" in message
        assert "\n" not in message
        assert "Traceback" not in message


def test_a_location_inside_a_repository_is_refused(repo: Path, tmp_path: Path) -> None:
    resource = Resource(
        resource_id="local/sub",
        kind="git",
        location=str(repo / "src"),
        sandbox_strategy=SandboxStrategyName.GIT_WORKTREE,
    )
    with pytest.raises(SandboxError, match=r"subfolder 'src/'.*top folder"):
        GitWorktreeStrategy().create(resource, PLAN, tmp_path / "root")


def test_a_repository_without_commits_fails_clearly(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    git(tmp_path, "init", "-q", str(empty))
    resource = Resource(
        resource_id="local/empty",
        kind="git",
        location=str(empty),
        sandbox_strategy=SandboxStrategyName.GIT_WORKTREE,
    )
    with pytest.raises(SandboxError, match="no commits yet: commit at least once"):
        GitWorktreeStrategy().create(resource, PLAN, tmp_path / "root")
    assert refs(empty, "refs/") == []


def test_a_worktree_folder_deleted_under_the_sandbox_is_reported(
    sandbox: GitWorktreeSandbox, resource: Resource, root: Path
) -> None:
    ref = sandbox.checkpoint()
    shutil.rmtree(sandbox.workdir)
    with pytest.raises(SandboxError, match="is missing"):
        sandbox.rollback(ref)
    with pytest.raises(SandboxError, match="no sandbox worktree"):
        GitWorktreeStrategy().open(resource, PLAN, root)


def test_git_missing_from_the_path_fails_clearly(
    resource: Resource, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(SandboxError, match="git is not installed") as raised:
        GitWorktreeStrategy().create(resource, PLAN, root)
    assert "install git" in (raised.value.fix or "")
