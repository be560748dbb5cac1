"""git_worktree checkpoint and rollback against the git CLI on trees of 5,000 and 50,000 files.

Each tree holds files of 2 KB in folders of 25 (``d<k>/s<j>/f<n>.txt``), committed once and
packed. The sandbox is a worktree of that repository; the baselines run in an identical copy
of it (``cp -a``), in the same run, on the same changes:

- checkpoint, with 10 files changed since the last one by the file tools (which name each
  path before they write it, :meth:`GitWorktreeSandbox.hand_out`), against the known-path
  plumbing of the same paths in a copy: ``git update-index -- <paths>``, ``git
  write-tree``, ``git commit-tree`` (three git processes); and against ``git add -A`` then
  ``git commit -q -m ...`` (two git processes, what a script would run);
- checkpoint after a command ran (the worktree handed out whole, so every file is
  examined: ``git status``), against ``git add -A && git commit``;
- rollback to the checkpoint 10 decisions back (about 100 files differ) as the engine runs
  it, the safety checkpoint the rollback protocol takes just before included (the sandbox
  is opened as the engine opens it, trusting that nobody was handed the worktree since the
  last rollback), against ``git reset --hard <commit>`` alone, although that keeps no copy
  of the state it leaves and leaves new files behind, where our rollback removes them;
- for reference, the same rollback with the safety checkpoint untimed; the rollback with no
  fresh checkpoint to start from (``checkout --force`` + ``clean``: reconciliation's
  discard, the restore of a resource that failed part way) against ``git reset --hard &&
  git clean -ffd``; and the safety checkpoint plus the rollback against saving by hand
  first: ``git add -A && git commit && git reset --hard``.

Figures are minimums, with the medians of the same runs beside them.

Every checkpoint also records what git does not keep (a walk of every folder, beside
``git status``), and every rollback restores it; see docs/benchmarks.md for its cost.

Quick mode skips the 50,000-file tree.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.git import GitWorktreeSandbox, GitWorktreeStrategy
from tests.benchmarks.harness import Measurement, best_of

GROUP = "git_worktree"
CHANGED = 10
BACK = 10
ENV = {
    **os.environ,
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, env=ENV, capture_output=True, check=True)
    return done.stdout.decode()


def build_repository(path: Path, files: int) -> list[str]:
    """``files`` files of 2 KB, committed and packed; returns their relative paths."""
    rng = random.Random(5)
    names = []
    for n in range(files):
        name = f"d{n // 500:03d}/s{n // 25 % 20:02d}/f{n:06d}.txt"
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(rng.randbytes(1024).hex().encode())
        names.append(name)
    git(path.parent, "init", "-q", "-b", "main", str(path))
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    git(path, "repack", "-adq")
    return names


class Changes:
    """The same sequence of 10-file edits, replayable on any copy of the tree."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.rng = random.Random(11)
        self.picked: list[str] = []

    def apply(self, roots: list[Path], sandbox: GitWorktreeSandbox | None = None) -> None:
        """The next edit in each of ``roots``; in ``sandbox`` too, each path handed out
        first, as the file tools do."""
        picked = self.picked = self.rng.sample(self.names, CHANGED)
        stamp = self.rng.randbytes(8).hex().encode()
        if sandbox is not None:
            roots = [*roots, sandbox.hand_out(picked)]
        for root in roots:
            for name in picked:
                with (root / name).open("ab") as handle:
                    handle.write(stamp)


Step = tuple[Callable[[], object], Callable[[], object]]


def interleaved(steps: list[Step], repeat: int) -> list[tuple[float, float]]:
    """(minimum, median) of ``repeat`` runs of each (set-up, action) step, taking turns so
    that drifting machine load hits every step alike; set-ups are not timed."""
    timings: list[list[float]] = [[] for _ in steps]
    for _ in range(repeat):
        for (setup, action), times in zip(steps, timings, strict=True):
            setup()
            times.append(best_of(action, 1))
    return [(min(times), statistics.median(times)) for times in timings]


def measurement(
    name: str, ours: tuple[float, float], baseline: str, theirs: tuple[float, float], goal: float
) -> Measurement:
    """A line judged on the minimums (``goal``: the largest ratio met; 0 for none)."""
    met = ours[0] <= goal * theirs[0] if goal else None
    target = f"≤ {goal:.1f}× baseline" if goal else "—"
    return Measurement(GROUP, name, ours[0], baseline, theirs[0], target, met, ours[1], theirs[1])


def nothing() -> None:
    """A set-up with nothing to do."""


def measure(files: int, repeat: int) -> list[Measurement]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo, copy, plumb = base / "repo", base / "copy", base / "plumbing"
        names = build_repository(repo, files)
        for clone in (copy, plumb):
            shutil.copytree(repo, clone, symlinks=True)
            git(clone, "status", "--porcelain")  # refresh its index (new inodes, mtimes)
        resource = Resource(
            resource_id="bench/repo",
            kind="git",
            location=str(repo),
            sandbox_strategy=SandboxStrategyName.GIT_WORKTREE,
        )
        sandbox = GitWorktreeStrategy().create(resource, "01BENCH", base / "sandbox")
        sandbox.track_handouts()  # as the engine's PlanSandboxes opens it
        changes = Changes(names)
        label = f"{files:,} files, {CHANGED} changed"

        def baseline_commit() -> None:
            git(copy, "add", "-A")
            git(copy, "commit", "-q", "-m", "decision")

        def known_path_plumbing() -> None:
            git(plumb, "update-index", "--", *changes.picked)
            tree = git(plumb, "write-tree").strip()
            git(plumb, "commit-tree", tree, "-p", "HEAD", "-m", "decision")

        def edit() -> None:  # as the file tools write: each path named first
            changes.apply([copy, plumb], sandbox)

        def command_edit() -> None:  # as a command writes: the worktree handed out whole
            changes.apply([sandbox.workdir, copy])

        # One untimed round each (builds the untracked cache, warms the page cache), then
        # flush the writes of the set-up so their writeback does not land in the timings.
        for step in (edit, command_edit):
            step()
            sandbox.checkpoint()
            baseline_commit()
        known_path_plumbing()
        os.sync()

        named, plumbing, by_script, scanned, by_script_too = interleaved(
            [
                (edit, sandbox.checkpoint),
                (nothing, known_path_plumbing),
                (nothing, baseline_commit),
                (command_edit, sandbox.checkpoint),
                (nothing, baseline_commit),
            ],
            repeat,
        )
        add_commit = "git add -A && git commit"
        results = [
            measurement(
                f"checkpoint ({label}, paths named by the tools)",
                named,
                "git update-index + write-tree + commit-tree (same paths)",
                plumbing,
                1.2,
            ),
            measurement(
                f"checkpoint ({label}, paths named by the tools)", named, add_commit, by_script, 0
            ),
            measurement(
                f"checkpoint ({label}, after a command: every file examined)",
                scanned,
                add_commit,
                by_script_too,
                0.8,
            ),
        ]
        return results + measure_rollback(sandbox, copy, edit, files, repeat)


def measure_rollback(
    sandbox: GitWorktreeSandbox, copy: Path, edit: Callable[[], None], files: int, repeat: int
) -> list[Measurement]:
    ours_refs: list[str] = []
    their_commits: list[str] = []
    for _ in range(BACK + 1):
        edit()
        ours_refs.append(sandbox.checkpoint())
        git(copy, "add", "-A")
        git(copy, "commit", "-q", "-m", "decision")
        their_commits.append(git(copy, "rev-parse", "HEAD").strip())
    os.sync()
    safety: list[str] = []

    def at_the_tip_with_a_safety_checkpoint() -> None:
        sandbox.rollback(ours_refs[-1])
        safety[:] = [sandbox.checkpoint()]

    def their_tip() -> None:
        git(copy, "reset", "--hard", "-q", their_commits[-1])

    def reset_and_clean() -> None:
        git(copy, "reset", "--hard", "-q", their_commits[0])
        git(copy, "clean", "-ffdq")

    def save_then_reset() -> None:
        git(copy, "add", "-A")
        git(copy, "commit", "-q", "--allow-empty", "-m", "safety")
        git(copy, "reset", "--hard", "-q", their_commits[0])

    def checkpoint_then_rollback() -> None:
        sandbox.rollback(ours_refs[0], current=sandbox.checkpoint())

    ours, reset, full, both, engine, by_hand = interleaved(
        [
            (
                at_the_tip_with_a_safety_checkpoint,
                lambda: sandbox.rollback(ours_refs[0], current=safety[0]),
            ),
            (their_tip, lambda: git(copy, "reset", "--hard", "-q", their_commits[0])),
            (lambda: sandbox.rollback(ours_refs[-1]), lambda: sandbox.rollback(ours_refs[0])),
            (their_tip, reset_and_clean),
            (lambda: sandbox.rollback(ours_refs[-1]), checkpoint_then_rollback),
            (their_tip, save_then_reset),
        ],
        repeat,
    )
    name = f"rollback {BACK} decisions back ({files:,} files)"
    reset_hard = "git reset --hard"
    return [
        measurement(f"{name}, safety checkpoint included", engine, reset_hard, reset, 1.0),
        measurement(f"{name}, safety checkpoint untimed", ours, reset_hard, reset, 0),
        measurement(
            f"{name}, no fresh checkpoint (checkout --force + clean)",
            full,
            "git reset --hard && git clean -ffd",
            both,
            0,
        ),
        measurement(
            f"{name}, safety checkpoint included",
            engine,
            "git add -A && git commit && git reset --hard",
            by_hand,
            0,
        ),
    ]


def run(quick: bool) -> list[Measurement]:
    results = measure(5_000, 5 if quick else 11)
    if not quick:
        results += measure(50_000, 5)
    return results
