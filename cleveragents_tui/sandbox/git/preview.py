"""What a git_worktree sandbox's Apply would land, read without writing to it or the repository.

``changes_since_baseline`` stages the worktree into the sandbox's index first (``git
update-index`` writes the index and blob objects into the repository). A dry run stages into
a copy of the index instead, with new objects going to a temporary object folder that borrows
the repository's objects (``GIT_ALTERNATE_OBJECT_DIRECTORIES``); both go when it returns.
The copy keeps the index's mtime, or git would trust the stat data of a file edited in the
same clock tick the index was written, and miss a same-size edit. The copy is written whole, never split: a split write puts a shared index file
(and expires old ones) in the sandbox's admin folder, wherever the index file itself is.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cleveragents_tui.sandbox.base import Change
from cleveragents_tui.sandbox.git.process import FSCK, Git
from cleveragents_tui.sandbox.git.repository import parse_changes
from cleveragents_tui.sandbox.git.staging import stage


class _WholeIndex(Git):
    """Git that writes the scratch index whole (``core.splitIndex=false`` after the
    sandbox's own configuration, which asks for a split index)."""

    def call(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return super().call("-c", "core.splitIndex=false", *args, stdin=stdin)


def pending_changes(git: Git, admin_dir: Path, workdir: Path, base: str) -> list[Change]:
    """The worktree's changes against ``base`` as Apply would commit them; ``git`` runs in
    the worktree (``GIT_DIR`` its admin folder ``admin_dir``)."""
    with _staged(git, admin_dir, workdir) as scratch_git:
        out = scratch_git.run(
            "diff-index", "--cached", "-z", "--no-renames", "--name-status", base, "--", fix=FSCK
        )
    return parse_changes(out)


def pending_tree(git: Git, admin_dir: Path, workdir: Path) -> str:
    """The tree Apply would commit (its objects written to the scratch folder only), so a
    dry run can tell whether an apply branch already there holds exactly it."""
    with _staged(git, admin_dir, workdir) as scratch_git:
        return scratch_git.run("write-tree", fix=FSCK).decode().strip()


@contextmanager
def _staged(git: Git, admin_dir: Path, workdir: Path) -> Iterator[Git]:
    """Git over a scratch copy of the sandbox's index, the worktree staged into it."""
    objects = git.run(
        "rev-parse", "--path-format=absolute", "--git-path", "objects", fix=FSCK
    ).decode()
    with tempfile.TemporaryDirectory(prefix="agents-apply-preview-") as scratch:
        index = Path(scratch) / "index"
        if (admin_dir / "index").is_file():
            # copy2 keeps the index's mtime: git re-reads a file changed in the same tick as
            # the index was written ("racily clean") only when it is older than the index.
            shutil.copy2(admin_dir / "index", index)
        own_objects = Path(scratch) / "objects"
        own_objects.mkdir()
        env = {
            **git.env,
            "GIT_INDEX_FILE": str(index),
            "GIT_OBJECT_DIRECTORY": str(own_objects),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": objects.strip(),
            "GIT_OPTIONAL_LOCKS": "0",
        }
        scratch_git = _WholeIndex(workdir, env, git.subject)
        stage(scratch_git, None, workdir)
        yield scratch_git
