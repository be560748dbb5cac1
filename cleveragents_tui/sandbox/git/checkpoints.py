"""The git_worktree sandbox's checkpoints: a commit of the worktree and a record beside it.

A checkpoint stages only what can have changed (nothing, the paths handed out, or what
``git status`` finds), writes the commit itself and moves both refs in one transaction;
the record keeps what git does not (:mod:`.blind_spots`).
"""

from __future__ import annotations

import secrets

from cleveragents_tui.sandbox.base import CheckpointMissingError, SandboxError
from cleveragents_tui.sandbox.git.checkout import WorktreeCheckout
from cleveragents_tui.sandbox.git.known_paths import stage_known
from cleveragents_tui.sandbox.git.process import full_sha
from cleveragents_tui.sandbox.git.repository import deletions
from cleveragents_tui.sandbox.git.staging import index_stamp, stage, tree_of


class CheckpointedWorktree(WorktreeCheckout):
    """Take, verify and drop checkpoints."""

    def checkpoint(self) -> str:
        self._ensure_live()
        self._ensure_on_branch()
        spots = self._spots
        held = self._mark.read(self._tip)
        noted, written = held if held is not None else (None, None)
        known = None
        if written and spots is not None:  # paths handed out since the tip: those alone
            known = stage_known(self._git, spots, self._workdir, self._tip, written)
        # The tip's record still holds (nothing, or only files' content, changed): kept as is.
        same = written == [] or (
            known is not None and spots is not None and known == spots.load(self._tip)
        )
        if written == []:
            # Nothing can have changed since the tip: its tree and record are this state's.
            tree = self._tree or noted or tree_of(self._git, self._tip)
            scanned = spots.load(self._tip) if spots else None
        elif known is not None:  # only the paths handed out can have changed
            scanned = known
            tree = self._write_tree()
        else:
            listing, walked = stage(self._git, spots, self._workdir, list_ignored=spots is not None)
            scanned = spots.scan(listing, spots.load(self._base), walked) if spots else None
            tree = self._write_tree()
        self._mark.clear()
        # The Checkpoint-Id line makes every checkpoint a distinct commit, even of an
        # identical state on the same parent in the same second, so dropping one checkpoint
        # (which deletes its ref) never takes another decision's checkpoint with it.
        message = (
            f"cleveragents checkpoint\n\nPlan: {self._names.plan_id}\n"
            f"Checkpoint-Id: {secrets.token_hex(8)}\n"
        )
        commit = self._commit(tree, self._tip, message)
        if spots is not None and same:
            spots.record_same(commit, self._tip)
        elif spots is not None and scanned is not None:
            spots.record(commit, scanned)
        self._update_refs(
            f"update {self._names.branch} {commit}\n"
            f"create {self._names.checkpoint(commit)} {commit}\n",
            fix="check that the repository is writable (disk space, permissions)",
        )
        self._tip, self._tree = commit, tree
        self._trees[commit] = tree
        self._index_seen = index_stamp(self._admin_dir)
        self._mark.put(commit, tree, self._index_seen)
        return commit

    def verify(self, ref: str) -> None:
        self._ensure_live()
        sha = full_sha(ref)
        name = self._ref_for(sha)
        done = self._git.call(
            "cat-file", "--batch-check", stdin=f"{name}\n{sha}^{{tree}}\n".encode()
        )
        lines = [line.split() for line in done.stdout.decode().splitlines()]
        intact = (
            done.returncode == 0
            and len(lines) == 2
            and lines[0][:2] == [sha, "commit"]
            and lines[1][1:2] == ["tree"]
        )
        if not intact:
            raise CheckpointMissingError(
                f"{self._git.subject}: checkpoint {sha} is gone ({name} or its objects are missing)",
                "roll back to another decision, or correct the plan with --mode=append",
            )
        self._trees[sha] = full_sha(lines[1][0])
        if self._spots is not None:
            self._spots.verify(sha)

    def drop_checkpoint(self, ref: str) -> None:
        self._ensure_live()
        sha = full_sha(ref)
        if sha == self._base:
            raise SandboxError(
                f"{self._git.subject}: the base commit {sha} is not a droppable checkpoint",
                "drop only references returned by checkpoint()",
            )
        self._update_refs(
            deletions([self._names.checkpoint(sha)]), fix="check that the repository is writable"
        )
        if self._spots is not None:
            self._spots.drop(sha)
        if sha == self._tip:
            self._mark.clear()  # its record is gone: the next checkpoint scans
