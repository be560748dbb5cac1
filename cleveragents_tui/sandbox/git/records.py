"""A record of what git does not keep of one state of a git_worktree sandbox, the notes that
tie records to checkpoints (:mod:`.blind_spots`), and the small filesystem helpers of taking
and restoring one.

A git tree holds tracked and untracked files with one permission bit (executable or not).
It holds no folder without a file in it, no ignored file, and no other permission bit. A
:class:`Record` holds exactly the rest of the worktree's state, so the git tree and the
record together describe every file, symlink and folder (except the top ``.git`` file, the
insides of nested repositories and submodules, and sockets, FIFOs and devices, which
neither keeps):

- ``dirs``: every folder outside the ignored paths, with its permission bits, empty ones
  too;
- ``file_mode``/``exec_mode``: the usual permission bits of files git sees as plain and as
  executable (those of the baseline, whose files git wrote with the umask's bits), and
  ``modes``, the files of the git tree whose bits are not the usual ones (``chmod 600``);
- ``ignored``: each path ``git ls-files --others --ignored --directory`` names (a file, a
  symlink, or a wholly ignored folder), as entries of the object store the filesystem_copy
  sandbox uses (:mod:`..objectstore`): content, permission bits, a folder's
  listing, and the lstat details that let the next checkpoint skip unchanged files.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.objectstore.names import check_entry_path, check_oid
from cleveragents_tui.sandbox.objectstore.objects import decode_note
from cleveragents_tui.sandbox.objectstore.tree_writer import TreeWriter
from cleveragents_tui.sandbox.objectstore.trees import KINDS, SYMLINK, Entry
from cleveragents_tui.sandbox.safety import UnsafeInputError


class Walk(NamedTuple):
    """What :meth:`BlindSpots.walk` found: the clock when it began, folders, files."""

    stamp: int
    dirs: dict[str, int]
    files: dict[str, int]


@dataclass(frozen=True, slots=True)
class Record:
    """What git does not keep of one state of the worktree (see the module docstring).

    ``files`` (every file of the git tree and its permission bits) is known only for a
    state just scanned; a record read back from the store has None there.
    """

    stamp: int
    file_mode: int
    exec_mode: int
    dirs: dict[str, int]
    modes: dict[str, int]
    ignored: dict[str, Entry]
    files: dict[str, int] | None = field(default=None, compare=False)

    def mode_of(self, path: str, st_mode: int) -> int:
        """The permission bits file ``path`` has in this state; ``st_mode`` (its mode now)
        says whether git sees it as executable, as git's own bit follows the owner's x."""
        found = self.modes.get(path)
        if found is not None:
            return found
        return self.exec_mode if st_mode & stat.S_IXUSR else self.file_mode

    def encode(self) -> bytes:
        doc = {
            "v": 1,
            "stamp": self.stamp,
            "file": self.file_mode,
            "exec": self.exec_mode,
            "dirs": sorted(self.dirs.items()),
            "modes": sorted(self.modes.items()),
            "ignored": [[path, *entry] for path, entry in sorted(self.ignored.items())],
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @staticmethod
    def decode(data: bytes) -> Record:
        """Parse and validate a stored record; anything unexpected raises UnsafeInputError."""
        try:
            doc = json.loads(data)
            if not isinstance(doc, dict) or doc.get("v") != 1:
                raise ValueError("unknown format")
            dirs = {check_entry_path(path): _mode(mode) for path, mode in doc["dirs"]}
            modes = {check_entry_path(path): _mode(mode) for path, mode in doc["modes"]}
            ignored = {check_entry_path(row[0]): _entry(row[1:]) for row in doc["ignored"]}
            return Record(
                _int(doc["stamp"]), _mode(doc["file"]), _mode(doc["exec"]), dirs, modes, ignored
            )
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise UnsafeInputError(
                f"a record of what git does not keep is damaged ({exc})",
                "the checkpoint cannot be used; roll back to another one",
            ) from exc


def _int(value: object) -> int:
    if type(value) is not int:
        raise ValueError(f"{value!r} is not an integer")
    return value


def _mode(value: object) -> int:
    if not 0 <= _int(value) <= 0o7777:
        raise ValueError(f"mode {value!r}")
    return _int(value)


def _entry(row: list[object]) -> Entry:
    kind, mode, size, mtime, ino, ctime, ref = row
    if kind not in KINDS or type(ref) is not str or not ref:
        raise ValueError(f"entry {row!r}")
    if kind != SYMLINK:
        check_oid(ref)
    return Entry(str(kind), _mode(mode), _int(size), _int(mtime), _int(ino), _int(ctime), ref)


def usual_mode(counts: Counter[int], default: int) -> int:
    return counts.most_common(1)[0][0] if counts else default


def remove_quietly(writer: TreeWriter, path: str) -> None:
    """Remove ``path`` (and what is under it) if it is there, following no symlink."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        writer.remove(path)


def listing_of(path: str, name: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as listing:
            return list(listing)
    except OSError as exc:
        raise SandboxError(
            f"cannot read the folder {name!r} of the sandbox ({exc.strerror})",
            "give its owner read and execute permission (chmod u+rx), or delete it",
        ) from None


def leave_out(ignored: set[str], dirs: dict[str, int], files: dict[str, int]) -> None:
    """Drop from a walk the ignored paths and what is under them."""
    under: set[str] = set()
    for path in sorted(dirs):  # a folder sorts before what it holds
        parent = path.rpartition("/")[0]
        if path in ignored or parent in under:
            under.add(path)
            del dirs[path]
    for path in [path for path in files if path in ignored or path.rpartition("/")[0] in under]:
        del files[path]


def read_note(raw: bytes) -> tuple[str, str | None] | None:
    """(sha, record id) of a checkpoint note, (sha, None) of a drop note, None otherwise."""
    doc = decode_note(raw)
    if doc is None:
        return None
    try:
        if "drop" in doc:
            return str(doc["drop"]), None
        return str(doc["checkpoint"]), check_oid(doc["record"])
    except (ValueError, KeyError, UnsafeInputError):
        return None


def keeps(raw: bytes, live: dict[str, str]) -> bool:
    """Whether a note still matters: the latest note of each live checkpoint."""
    note = read_note(raw)
    return note is not None and note[1] is not None and live.get(note[0]) == note[1]


def umask_now() -> int | None:
    """The process's umask, read without setting it (``os.umask`` sets it, for every thread
    meanwhile); None where the system does not say."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        return None
    return None
