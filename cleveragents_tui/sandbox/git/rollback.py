"""The git_worktree sandbox's two rollback paths: from any state, or from the checkpoint
just taken (only the paths the two checkpoints differ in are written).

See :mod:`cleveragents_tui.sandbox.git` for why there are two, and
:meth:`RollingWorktree._roll_from` for when the fast one is trusted.
"""

from __future__ import annotations

import os

from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.git.blind_spots import LIST_IGNORED
from cleveragents_tui.sandbox.git.checkpoints import CheckpointedWorktree
from cleveragents_tui.sandbox.git.process import FSCK, full_sha, reason_of
from cleveragents_tui.sandbox.git.records import Record, Walk
from cleveragents_tui.sandbox.git.repository import short_ref
from cleveragents_tui.sandbox.git.staging import index_stamp, needs_clean


class RollingWorktree(CheckpointedWorktree):
    """Roll the worktree back to a checkpoint, files and records both."""

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        self._ensure_live()
        sha = full_sha(ref)
        self._ensure_on_branch()
        self._mark.clear()
        spots = self._spots
        target = spots.load(sha) if spots is not None else None
        written = None if current is None else self._roll_from(full_sha(current), sha, target)
        if written is None:
            self._roll_fully(sha)
        if spots is not None and target is not None:
            # Then what git does not keep: from the fresh checkpoint's record when the
            # rollback started from it, else from a scan of what the full rollback left.
            if written is None:
                walked = list[Walk]()
                [listed] = self._git.call_together(
                    LIST_IGNORED, meanwhile=lambda: walked.append(spots.walk())
                )
                if listed.returncode != 0:
                    reason = reason_of(listed.stderr, listed.returncode)
                    raise SandboxError(f"{self._git.subject}: git ls-files failed ({reason})", FSCK)
                present = spots.scan(listed.stdout, spots.load(self._base), walked[0])
                spots.restore(present, target, None)
            else:
                spots.restore(spots.load(full_sha(current or "")), target, written)
        self._index_seen = index_stamp(self._admin_dir)
        self._tree = self._trees.get(sha)
        self._mark.put(sha, self._tree, self._index_seen)

    def _roll_fully(self, sha: str) -> None:
        """What ``reset --hard`` + ``clean -ffd`` do, from any state of the worktree."""
        name = self._ref_for(sha)
        # Files, index and our branch to the checkpoint, untracked files in the way
        # overwritten; checkout examines the files with the index preload, in parallel,
        # where reset looks at them one after the other.
        branch = short_ref(self._names.branch)
        done = self._git.call("checkout", "--quiet", "--force", "-B", branch, name, "--")
        if done.returncode != 0:
            self.verify(sha)
            raise SandboxError(
                f"{self._git.subject}: git checkout failed "
                f"({reason_of(done.stderr, done.returncode)})",
                f"check that {self._workdir} is writable, then retry the rollback",
            )
        self._tip = sha
        # Runs after the checkout so the .gitignore files of the checkpoint decide what is new.
        self._clean()

    def _roll_from(self, current: str, target: str, record: Record | None) -> dict[str, str] | None:
        """Roll back from checkpoint ``current``, which the caller says the worktree holds
        (the rollback protocol's safety checkpoint, taken just now): only the paths the two
        trees differ in are examined and written. None when that cannot be trusted or git
        refuses; the caller then rolls back fully (which starts from any state). Else the
        paths the two trees differ in, each with ``diff-tree``'s status letter: what git
        wrote (``M``: the same path rewritten, no folder above it made or removed).

        Trusted only when ``current`` is the last checkpoint this object took or rolled to
        and the index is the file it left (nothing staged since), so the index holds
        ``current``'s tree with fresh file times. ``read-tree -m -u <target>`` then keeps
        every entry the target shares without looking at its file (the index's cache tree
        lets it skip whole unchanged folders), writes only the rest, and refuses, before
        writing anything, if a file it must write was edited; ``reset --hard`` would examine
        every file. Beside it, with no process started for them, our branch moves and the
        running ``diff-tree`` names the changed paths (what the records restore; a
        ``.gitignore`` among them changes what ``clean`` takes). Without records, ``ls-files
        --others --directory`` runs too, listing what ``clean`` would take, which in the
        state ``current`` can only be empty folders (every other untracked file is in the
        checkpoint), so that ``clean`` (a walk of every folder) runs only when it has
        something to do. See :func:`needs_clean` for what it may see of ``read-tree`` at work.
        """
        stamp = index_stamp(self._admin_dir)
        if current != self._tip or stamp is None or stamp != self._index_seen:
            return None
        new = self._ref_for(target)
        changed: list[dict[bytes, str] | None] = []

        def meanwhile() -> None:
            # Our branch moves while git writes the files: should git refuse, the full
            # rollback moves it to the same commit.
            self._moved_to(target)
            changed.append(self._changed(current, target))

        if self._spots is not None and record is not None:
            # The records of the two states say what else differs; clean has no work here:
            # in the state ``current`` the only untracked paths are its recorded folders.
            have = self._spots.load(current)
            if not self._spots.can_start_from(have, record):
                return None
            self._spots.clear_ignored(have, record)  # none is in the way of read-tree
            [update] = self._git.call_together(("read-tree", "-m", "-u", new), meanwhile=meanwhile)
            if update.returncode != 0 or changed[0] is None:
                return None  # what git wrote is unknown: the full rollback finds out
            return {os.fsdecode(path): status for path, status in changed[0].items()}
        update, untracked = self._git.call_together(
            ("read-tree", "-m", "-u", new),
            ("ls-files", "-z", "--others", "--directory", "--exclude-standard"),
            meanwhile=meanwhile,
        )
        if update.returncode != 0:
            return None
        if (
            changed[0] is None
            or untracked.returncode != 0
            or needs_clean(self._workdir, changed[0], untracked.stdout)
        ):
            self._clean()
        return {}

    def _changed(self, old: str, new: str) -> dict[bytes, str] | None:
        """The paths checkpoints ``old`` and ``new`` differ in (``-z`` names), each with its
        status letter; None if git cannot tell. Both are this sandbox's: the caller names
        ``new`` by its ref to git."""
        try:
            request = f"{full_sha(new)} {full_sha(old)}\n".encode()
            out = self._diffs.ask_through(request, self._diff_end, fix=FSCK)
        except SandboxError:
            return None
        fields = out.split(b"\0")  # "X\0path\0" pairs, then the empty rest
        if len(fields) % 2 != 1:
            return None
        pairs = zip(fields[0:-1:2], fields[1::2], strict=True)
        return {path: status[:1].decode("ascii", "replace") for status, path in pairs}

    def _moved_to(self, target: str) -> None:
        """Our branch to ``target``, whose files the worktree and index now hold."""
        self._update_refs(
            f"update {self._names.branch} {target}\n",
            fix="check that the repository is writable, then retry the rollback",
        )
        self._tip = target

    def _clean(self) -> None:
        self._git.run(
            "clean",
            "-ffdq",
            fix=f"check that {self._workdir} is writable, then retry the rollback",
        )
