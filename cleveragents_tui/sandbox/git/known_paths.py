"""A checkpoint from the paths the tools said they would write, without ``git status``.

When the worktree held the tip as the last checkpoint or rollback left it, and since then
it was handed out only for named paths (:meth:`.checkout.WorktreeCheckout.hand_out`),
nothing else can differ: only those paths go to ``git update-index`` and the tip's record
of what git does not keep is brought up to date for them alone, by an ``lstat`` of each and
of the folders above it. The result is what the full scan would find, or :func:`stage_known`
says it cannot vouch for that (None) and the caller scans every file:

- a ``.gitignore`` among them changes what is ignored elsewhere;
- a path an ignore rule matches (``git check-ignore --no-index``, which also names a tracked
  file a rule matches; asked while ``update-index`` runs, whose entries for the paths then
  go back to the tip's with ``git reset <tip> -- <paths>``) or one inside an ignored path of
  the tip's record: those are kept in the record, not in the tree;
- a path inside a folder holding a ``.git`` (a submodule or nested repository);
- a folder that is new since the tip with no path written under it: ``update-index``
  cannot tell a folder that replaced a file from one that replaced nothing;
- ``update-index`` refusing anything (it then changes nothing).
"""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
import threading
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path

from cleveragents_tui.sandbox.git.blind_spots import BlindSpots
from cleveragents_tui.sandbox.git.process import FSCK, Git
from cleveragents_tui.sandbox.git.records import Record

IGNORE_RULES = ".gitignore"


def stage_known(
    git: Git, spots: BlindSpots, workdir: Path, tip: str, paths: Sequence[str]
) -> Record | None:
    """Stage ``paths`` (relative, checked) and return the record of the state they leave,
    from the record of checkpoint ``tip``, which the worktree held but for them; None when
    only a full scan can vouch for the result (the index then holds what it held, or
    what the paths staged anew)."""
    have = spots.load(tip)
    if any(os.path.basename(path) == IGNORE_RULES for path in paths):
        return None
    if any(_under(path, have.ignored) for path in paths):
        return None
    folders = _folders_above(paths)
    root = os.fsencode(workdir)
    if any(os.path.lexists(os.path.join(root, os.fsencode(f), b".git")) for f in folders):
        return None
    kinds = {path: _mode(root, path) for path in (*folders, *paths)}
    if any(path in have.dirs and not stat.S_ISDIR(mode) for path, mode in kinds.items()):
        return None  # a folder gone: what was under it is not among the paths
    # A folder new since the tip may stand where a file was: the index drops that file's
    # entry only for a file added below it (``--replace``).
    added = [path for path in paths if kinds[path] and not stat.S_ISDIR(kinds[path])]
    holding = set(_folders_above(added))
    new_folders = (p for p, mode in kinds.items() if stat.S_ISDIR(mode) and p not in have.dirs)
    if any(folder not in holding for folder in new_folders):
        return None
    record = _updated(spots, have, paths, folders, kinds)
    staged = [path for path in paths if not stat.S_ISDIR(kinds[path])]  # no index entry
    if not staged:
        return record
    listed = b"".join(os.fsencode(path) + b"\0" for path in staged)
    # Whether an ignore rule matches one of them is asked while update-index stages them: a
    # match is rare, and then the index entries of the paths go back to the tip's.
    asked: list[subprocess.CompletedProcess[bytes]] = []
    asking = threading.Thread(target=_ask_ignored, args=(git, listed, asked))
    asking.start()
    try:
        done = git.call(
            "update-index", "--add", "--remove", "--replace", "-z", "--stdin", stdin=listed
        )
    finally:
        asking.join()
    if asked and asked[0].returncode == 1:  # no rule matches any of them
        return record if done.returncode == 0 else None  # a refusal changed nothing
    if done.returncode == 0:
        literal = b"".join(b":(literal)" + os.fsencode(path) + b"\0" for path in staged)
        git.run(
            "reset",
            "-q",
            tip,
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            stdin=literal,
            fix=FSCK,
        )
    return None


def _ask_ignored(git: Git, listed: bytes, into: list[subprocess.CompletedProcess[bytes]]) -> None:
    """``check-ignore`` of ``listed``: exit status 1 when no rule matches any of them."""
    with contextlib.suppress(Exception):  # not answered: taken as "cannot tell"
        into.append(git.call("check-ignore", "--no-index", "-z", "--stdin", stdin=listed))


def _under(path: str, ignored: Collection[str]) -> bool:
    parts = path.split("/")
    return any("/".join(parts[:depth]) in ignored for depth in range(1, len(parts) + 1))


def _folders_above(paths: Sequence[str]) -> list[str]:
    """Every folder that holds one of ``paths`` (the worktree's top left out)."""
    found: dict[str, None] = {}
    for path in paths:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            found["/".join(parts[:depth])] = None
    return list(found)


def _mode(root: bytes, path: str) -> int:
    """``st_mode`` of ``path``, 0 when there is nothing (or no folder above it)."""
    try:
        return os.lstat(os.path.join(root, os.fsencode(path))).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return 0


def _updated(
    spots: BlindSpots,
    have: Record,
    paths: Sequence[str],
    folders: Sequence[str],
    kinds: dict[str, int],
) -> Record:
    """``have`` with what ``paths`` and the folders above them are now: what a walk of the
    worktree would find there, nothing else being different."""
    dirs, modes = dict(have.dirs), dict(have.modes)
    for path in (*folders, *paths):
        mode = kinds[path]
        if stat.S_ISDIR(mode):
            dirs[spots.check(path)] = stat.S_IMODE(mode)
        elif stat.S_ISREG(mode):
            bits = stat.S_IMODE(mode)
            usual = have.exec_mode if bits & stat.S_IXUSR else have.file_mode
            if bits == usual:
                modes.pop(path, None)
            else:
                modes[spots.check(path)] = bits
        else:
            modes.pop(path, None)
    return replace(have, dirs=dirs, modes=modes, files=None)
