"""The ``git_worktree`` sandbox strategy (ADR-035, DESIGN.md sections 5 and 8).

The sandbox is a linked worktree of the user's repository (``resource.location``) placed at
``<root>/worktree``, on a branch of ours, ``refs/heads/cleveragents/<plan_id>``, that starts
at the commit the user's HEAD named when the sandbox was created (the *base*). The user's
HEAD, index, branches and working tree are never written: every command that touches a
checkout runs with ``GIT_DIR``/``GIT_WORK_TREE`` pinned to the sandbox, so neither a
tampered ``.git`` file inside the sandbox nor ``GIT_*`` variables inherited from the caller
can redirect it.

Refs kept in the user's repository (all removed by :meth:`GitWorktreeSandbox.discard`,
except the apply branch, which is the deliverable):

- ``refs/heads/cleveragents/<plan_id>``: the sandbox branch, checked out in the worktree; its
  tip is the last checkpoint (or the one rolled back to).
- ``refs/cleveragents/<plan_id>/base``: the base commit.
- ``refs/cleveragents/<plan_id>/checkpoints/<sha>``: one per checkpoint, so ``git gc``
  never drops an old attempt and any two can still be diffed. Rolling back moves the branch
  but leaves these refs alone; the checkpoint commits form a tree of attempts.
- ``refs/heads/cleveragents/apply/<plan_id>``: what :meth:`GitWorktreeSandbox.apply` made.

What a checkpoint holds: its commit, every tracked and untracked file with git's mode
(executable bit, symlinks); and beside it, in ``<root>/blind-spots``, a record of what git
does not keep (:mod:`.git_blind_spots`): every folder (empty ones too) and ignored file
(per the ``.gitignore`` files of the moment), and every permission bit. A rollback restores
both, so the worktree is what it was, folder for folder and bit for bit. Not kept: the
contents of submodules (git keeps their commit), sockets, FIFOs and devices. An ignored
nested repository is kept as ignored files; one that is not ignored cannot be captured, so
:meth:`GitWorktreeSandbox.checkpoint` refuses it. The user's uncommitted changes at
creation time are not part of the sandbox: it starts from the base commit. Files are stored
as ``git add`` stores them, so in a repository with end-of-line conversion or clean/smudge
filters a rollback writes them back as ``git checkout`` would.

Speed: ``git add -A && git commit`` examines every file twice (add, then commit's own index
refresh), reads every folder, and runs hooks. A checkpoint here examines the files once, with
``git status`` and the untracked cache (which stats folders instead of reading them), hands
only the changed paths to ``git update-index``, writes the tree with ``write-tree``, and then
asks two long-running git processes (``hash-object --stdin-paths`` for the commit object,
``update-ref --stdin`` for one transaction moving both refs) instead of starting two more.
The sandbox's index is a split index, so each index write is small. Rollback has two
paths. From any state it is ``checkout --force -B <our branch> <checkpoint>`` (what
``reset --hard`` does, with the files examined in parallel) followed by ``clean -ffd`` (new
files would stay behind): it examines every tracked file, as only that shows edits made
since the last checkpoint. The rollback protocol takes a safety checkpoint just before it
rolls back, and passes it as ``current``: then nothing was edited since, and
``read-tree -m -u`` writes only the paths the two checkpoints differ in (see
:meth:`GitWorktreeSandbox._roll_from`). docs/benchmarks.md has the figures. The long-running processes end with :meth:`discard`, or
when the sandbox object is garbage-collected; use one sandbox object from one thread at a time.

Every method raises :class:`SandboxError` (or :class:`UnsafeInputError` for hostile input)
with one line naming the resource and the fix; no traceback from git reaches the user.
Requires git 2.31 or later.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from cleveragents_tui import failpoints
from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.sandbox.base import (
    ApplyResult,
    Change,
    ChangeKind,
    CheckpointMissingError,
    SandboxError,
)
from cleveragents_tui.sandbox.git_blind_spots import (
    DIRNAME,
    LIST_IGNORED,
    BlindSpots,
    Record,
    Walk,
)
from cleveragents_tui.sandbox.safety import (
    UnsafeInputError,
    check_ref_name,
    check_sha,
    safe_relative_path,
)

WORKTREE_DIRNAME = "worktree"
IDENTITY = ("cleveragents", "cleveragents@localhost")
_FSCK = "check the repository with `git fsck`; if it is damaged, discard the sandbox"

# Passed to every git command. Hooks are never ours to run (post-checkout fires on
# ``worktree add``, reference-transaction on every ref update); an fsmonitor configured for
# the user's checkout knows nothing of ours; sparse checkout would hide files from the agent;
# submodule recursion would touch repositories we do not own. Speed: the untracked cache
# lets status stat folders instead of reading them (only when its flags match ``-uall``,
# hence status.showUntrackedFiles); the split index makes each of our index writes small
# (the sandbox's own index; old shared parts expire after an hour, not two weeks); the
# index preload examines the files in parallel (status, checkout).
_CONFIG = (
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.fsmonitor=false",
    "-c", "core.sparseCheckout=false",
    "-c", "submodule.recurse=false",
    "-c", "core.untrackedCache=true",
    "-c", "core.preloadIndex=true",
    "-c", "status.showUntrackedFiles=all",
    "-c", "core.splitIndex=true",
    "-c", "splitIndex.sharedIndexExpire=1.hour.ago",
)  # fmt: skip

# Inherited GIT_* variables that may pass through; all others (GIT_DIR, GIT_INDEX_FILE,
# GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF, ...) could redirect or alter what we run.
_KEPT_GIT_VARS = frozenset(
    {
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_NOSYSTEM",
        "GIT_CONFIG_SYSTEM",
        "GIT_EXEC_PATH",
        "GIT_TRACE",
        "GIT_TRACE2",
        "GIT_TRACE2_EVENT",
        "GIT_TRACE2_PERF",
        "GIT_TRACE_PERFORMANCE",
    }
)

# "<oid> <type> <size>", what ``cat-file --batch`` prints before an object it found.
_BATCH_HEADER = re.compile(rb"^[0-9a-f]{40}(?:[0-9a-f]{24})? ([a-z]+) ([0-9]+)$")

_CHANGE_KINDS = {
    "A": ChangeKind.ADDED,
    "D": ChangeKind.DELETED,
    "M": ChangeKind.MODIFIED,
    "T": ChangeKind.MODIFIED,
}


def _sha(value: str) -> str:
    """``check_sha``, refusing a line break too: its ``$`` also matches before a final newline,
    and SHAs and refs travel here in line-based stdin protocols (update-ref, cat-file)."""
    sha = check_sha(value)
    if "\n" in sha:
        raise UnsafeInputError(f"{value!r} is not a full git object id", "use the 40-character SHA")
    return sha


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEPT_GIT_VARS}
    env.update(
        LC_ALL="C",
        GIT_TERMINAL_PROMPT="0",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_AUTHOR_NAME=IDENTITY[0],
        GIT_AUTHOR_EMAIL=IDENTITY[1],
        GIT_COMMITTER_NAME=IDENTITY[0],
        GIT_COMMITTER_EMAIL=IDENTITY[1],
    )
    return env


def _reason(stderr: bytes, returncode: int) -> str:
    """git's own one-line explanation: the first ``fatal:``/``error:`` line, else the first."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line.removeprefix(prefix)[:300]
    return lines[0][:300] if lines else f"exit code {returncode}"


class _Git:
    """Runs git in one directory with one fixed environment; failures become SandboxError."""

    def __init__(self, cwd: Path, env: Mapping[str, str], subject: str) -> None:
        self.cwd = cwd
        self.env = dict(env)
        self.subject = subject

    def call(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        failpoints.hit("git.call", args[0])
        try:
            return subprocess.run(
                ["git", *_CONFIG, *args],
                cwd=self.cwd,
                env=self.env,
                input=stdin,
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise self.cannot_start(exc) from None

    def call_together(
        self, *commands: tuple[str, ...], meanwhile: Callable[[], object] | None = None
    ) -> list[subprocess.CompletedProcess[bytes]]:
        """Run ``commands`` at the same time and wait for all; the caller makes sure they do
        not write the same files. Every failpoint is passed before the first one starts, so
        an injected fault never leaves one running alone. ``meanwhile`` runs here while
        they do (work of our own that only reads the same files)."""
        for args in commands:
            failpoints.hit("git.call", args[0])
        started: list[subprocess.Popen[bytes]] = []
        try:
            for args in commands:
                started.append(
                    subprocess.Popen(
                        ["git", *_CONFIG, *args],
                        cwd=self.cwd,
                        env=self.env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                    )
                )
        except OSError as exc:
            for process in started:
                process.communicate()
            raise self.cannot_start(exc) from None
        try:
            if meanwhile is not None:
                meanwhile()
        finally:
            results = []
            for process in started:
                out, err = process.communicate()
                results.append(
                    subprocess.CompletedProcess(process.args, process.returncode, out, err)
                )
        return results

    def cannot_start(self, exc: OSError) -> SandboxError:
        if not self.cwd.is_dir():
            return SandboxError(
                f"{self.subject}: the folder {self.cwd} is missing",
                "discard the sandbox and run the plan again",
            )
        if isinstance(exc, FileNotFoundError):
            return SandboxError(
                f"{self.subject}: git is not installed ({exc.strerror})",
                "install git 2.31 or later and put it on PATH",
            )
        return SandboxError(
            f"{self.subject}: cannot run git in {self.cwd} ({exc.strerror})",
            "check that the folder exists and is readable",
        )

    def run(self, *args: str, fix: str, stdin: bytes = b"") -> bytes:
        done = self.call(*args, stdin=stdin)
        if done.returncode != 0:
            reason = _reason(done.stderr, done.returncode)
            raise SandboxError(f"{self.subject}: git {args[0]} failed ({reason})", fix)
        return done.stdout


class _Pipe:
    """One long-running git command answering requests on stdin, one line per answer.

    Starting git costs about 2 ms (more than the work of a ref update); a request to a
    running ``update-ref --stdin`` or ``hash-object --stdin-paths`` costs about 0.1 ms. A
    process that dies (git exits on the first error, undoing an open transaction) is
    reported with its stderr and restarted by the next request.
    """

    def __init__(self, git: _Git, *args: str) -> None:
        self._git = git
        self._args = args
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._lock = threading.Lock()

    def ask(self, request: bytes, answers: int, fix: str) -> list[bytes]:
        failpoints.hit("git.call", self._args[0])
        with self._lock:
            process = self._process
            if process is None or process.poll() is not None:
                process = self._start()
            assert process.stdin is not None and process.stdout is not None
            lines: list[bytes] = []
            try:
                process.stdin.write(request)
                process.stdin.flush()
                lines = [process.stdout.readline() for _ in range(answers)]
            except OSError:
                pass
            if len(lines) == answers and all(line.endswith(b"\n") for line in lines):
                return [line[:-1] for line in lines]
            reason = self._stop()
        raise SandboxError(f"{self._git.subject}: git {self._args[0]} failed ({reason})", fix)

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _start(self) -> subprocess.Popen[bytes]:
        self._stop()
        # stderr goes to a file, not a pipe nobody reads while git runs (a full pipe blocks).
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed by _stop)
        try:
            self._process = subprocess.Popen(
                ["git", *_CONFIG, *self._args],
                cwd=self._git.cwd,
                env=self._git.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
            )
        except OSError as exc:
            raise self._git.cannot_start(exc) from None
        return self._process

    def _stop(self) -> str:
        """End the process (closing stdin is git's cue to exit); what it said on stderr."""
        process, self._process = self._process, None
        if process is None:
            return "not running"
        assert process.stdin is not None and process.stdout is not None and self._stderr
        process.stdin.close()
        returncode = process.wait()
        process.stdout.close()
        self._stderr.seek(0)
        reason = _reason(self._stderr.read(), returncode)
        self._stderr.close()
        return reason


@dataclass(frozen=True, slots=True)
class _Names:
    """The refs of one plan's sandbox, each checked by ``check_ref_name`` once, here."""

    plan_id: str
    branch: str
    base: str
    checkpoints: str
    apply_branch: str

    @classmethod
    def for_plan(cls, plan_id: str) -> _Names:
        if not plan_id.isprintable() or "/" in plan_id or plan_id in ("", "apply"):
            raise UnsafeInputError(f"plan id {plan_id!r} cannot name a git branch", "use a ULID")
        check_ref_name(f"refs/cleveragents/{plan_id}")
        return cls(
            plan_id=plan_id,
            branch=check_ref_name(f"refs/heads/cleveragents/{plan_id}"),
            base=check_ref_name(f"refs/cleveragents/{plan_id}/base"),
            checkpoints=check_ref_name(f"refs/cleveragents/{plan_id}/checkpoints") + "/",
            apply_branch=check_ref_name(f"refs/heads/cleveragents/apply/{plan_id}"),
        )

    def checkpoint(self, sha: str) -> str:
        return check_ref_name(self.checkpoints + _sha(sha))


def _short(ref: str) -> str:
    return ref.removeprefix("refs/heads/")


def _parse_changes(raw: bytes) -> list[Change]:
    """``--name-status -z`` output (``X\\0path\\0`` pairs, no renames) as sorted Changes."""
    fields = raw.split(b"\0")
    changes = [
        Change(
            path=os.fsdecode(path), kind=_CHANGE_KINDS.get(status.decode()[:1], ChangeKind.MODIFIED)
        )
        for status, path in zip(fields[0:-1:2], fields[1::2], strict=True)
    ]
    return sorted(changes, key=lambda change: change.path)


@dataclass(frozen=True, slots=True)
class _Repository:
    """The user's repository as found from ``resource.location`` (never via inherited env)."""

    location: Path
    common_dir: Path
    git: _Git

    @classmethod
    def find(cls, resource: Resource, subject: str, env: Mapping[str, str]) -> _Repository:
        location = Path(resource.location).expanduser()
        fix = f"set the location of {resource.resource_id} to the folder of a git repository"
        if not location.is_dir():
            raise SandboxError(f"{subject}: {location} is not a folder", fix)
        git = _Git(location.resolve(), env, subject)
        done = git.call("rev-parse", "--path-format=absolute", "--git-common-dir", "--show-prefix")
        if done.returncode != 0:
            reason = _reason(done.stderr, done.returncode)
            raise SandboxError(
                f"{subject}: {location} is not a usable git repository ({reason})", fix
            )
        common_dir, prefix = (os.fsdecode(line) for line in done.stdout.split(b"\n")[:2])
        if prefix:
            # A worktree always holds the whole repository; a sandbox of a subfolder would
            # checkpoint, roll back and apply more than the resource names.
            raise SandboxError(
                f"{subject}: {location} is the subfolder {prefix!r} of a git repository",
                f"set the location of {resource.resource_id} to the repository's top folder",
            )
        return cls(location=git.cwd, common_dir=Path(common_dir), git=git)

    def admin_dir(self, workdir: Path) -> Path | None:
        """git's administrative folder for the worktree at ``workdir`` (gitrepository-layout:
        ``worktrees/<id>/gitdir`` holds the path of the worktree's ``.git`` file). Found from
        the repository side so a rewritten ``.git`` file in the sandbox cannot mislead us."""
        wanted = (workdir / ".git").resolve()
        for gitdir in sorted((self.common_dir / "worktrees").glob("*/gitdir")):
            try:
                recorded = Path(gitdir.read_text("utf-8").strip()).resolve()
            except (OSError, UnicodeDecodeError):
                continue
            if recorded == wanted:
                return gitdir.parent
        return None


class GitWorktreeSandbox:
    """One plan's worktree of one git repository; see the module docstring for the layout.

    Made by :meth:`GitWorktreeStrategy.create` (or :meth:`create`) and reopened by
    :meth:`GitWorktreeStrategy.open` (or :meth:`open`). Checkpoint references are full
    commit SHAs; :attr:`base` (the commit the sandbox started from) is accepted wherever a
    checkpoint is, so the engine can roll a resource back to its baseline.
    """

    def __init__(
        self,
        resource: Resource,
        names: _Names,
        repository: _Repository,
        workdir: Path,
        admin_dir: Path,
        base: str,
        tip: str,
        spots: BlindSpots | None,
    ) -> None:
        self._resource = resource
        self._names = names
        self._repository = repository
        self._workdir = workdir
        self._admin_dir = admin_dir
        self._base = _sha(base)
        # The branch's tip as this object last set it: the parent of the next checkpoint.
        # The branch is a chain of checkpoints; a commit an agent makes inside the sandbox is
        # captured by the next checkpoint's files but does not stay on the branch.
        self._tip = _sha(tip)
        env = {**repository.git.env, "GIT_DIR": str(admin_dir), "GIT_WORK_TREE": str(workdir)}
        self._git = _Git(workdir, env, repository.git.subject)
        self._refs = _Pipe(self._git, "update-ref", "--stdin")
        # Commit objects are written from a draft file in the root folder, outside the
        # worktree; one per object, rewritten in place for each commit.
        self._draft = workdir.parent / f"commit-{secrets.token_hex(4)}.txt"
        self._objects = _Pipe(
            _Git(workdir.parent, env, repository.git.subject),
            "hash-object",
            "-t",
            "commit",
            "-w",
            "--stdin-paths",
            "--no-filters",
        )
        self._release = weakref.finalize(self, _release, self._draft, self._refs, self._objects)
        self._discarded = False
        # The index file as this object's last checkpoint or rollback left it (see _roll_from).
        self._index_seen: tuple[int, int, int] | None = None
        # What git does not keep (empty folders, ignored files, permission bits), recorded
        # beside each checkpoint; None for a sandbox made before such records were kept.
        self._spots = spots

    # ----------------------------------------------------------------- creating, reopening

    @classmethod
    def create(cls, resource: Resource, plan_id: str, root: Path) -> GitWorktreeSandbox:
        """A new worktree at ``<root>/worktree`` on a new branch at the user's HEAD commit."""
        names = _Names.for_plan(plan_id)
        subject = _subject(resource, plan_id)
        repository = _Repository.find(resource, subject, _base_env())
        git = repository.git
        head = git.call("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
        if head.returncode != 0:
            raise SandboxError(
                f"{subject}: the repository at {repository.location} has no commits yet",
                "commit at least once before running a plan on it",
            )
        base = _sha(head.stdout.decode().strip())
        root.mkdir(parents=True, exist_ok=True)
        workdir = root.resolve() / WORKTREE_DIRNAME
        if workdir.exists():
            raise SandboxError(
                f"{subject}: {workdir} already exists",
                "open the existing sandbox, or discard it before creating a new one",
            )
        git.run(
            "update-ref",
            "--stdin",
            stdin=f"create {names.branch} {base}\ncreate {names.base} {base}\n".encode(),
            fix=f"a sandbox for plan {plan_id} already exists in {repository.location}: "
            "open it, or discard it first",
        )
        added = git.call("worktree", "add", "--quiet", "--", str(workdir), _short(names.branch))
        if added.returncode != 0:
            git.call("update-ref", "--stdin", stdin=_deletions([names.branch, names.base]).encode())
            raise SandboxError(
                f"{subject}: git worktree add failed ({_reason(added.stderr, added.returncode)})",
                f"check that {root} is writable and that git is 2.31 or later",
            )
        admin_dir = repository.admin_dir(workdir)
        if admin_dir is None:
            raise SandboxError(
                f"{subject}: git did not register the worktree at {workdir}",
                "discard the sandbox and check the repository with `git worktree list`",
            )
        spots = BlindSpots.create(root.resolve() / DIRNAME, workdir)
        sandbox = cls(resource, names, repository, workdir, admin_dir, base, base, spots)
        spots.record(base, spots.scan(sandbox._git.run(*LIST_IGNORED, fix=_FSCK), None))
        return sandbox

    @classmethod
    def open(cls, resource: Resource, plan_id: str, root: Path) -> GitWorktreeSandbox:
        """The sandbox :meth:`create` made for the same resource, plan and root."""
        names = _Names.for_plan(plan_id)
        subject = _subject(resource, plan_id)
        repository = _Repository.find(resource, subject, _base_env())
        workdir = root.resolve() / WORKTREE_DIRNAME
        admin_dir = repository.admin_dir(workdir)
        if admin_dir is None or not workdir.is_dir():
            raise SandboxError(
                f"{subject}: there is no sandbox worktree at {workdir}",
                "create the sandbox first (or check the root folder it was created under)",
            )
        listed = repository.git.run(
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            names.branch,
            names.base,
            fix="check the repository with git fsck",
        )
        refs = {
            name: sha for name, sha in (line.split(" ", 1) for line in listed.decode().splitlines())
        }
        if names.branch not in refs or names.base not in refs:
            raise SandboxError(
                f"{subject}: the sandbox refs {names.branch} and {names.base} are incomplete",
                "discard the sandbox and run the plan again",
            )
        spots = BlindSpots.open(root.resolve() / DIRNAME, workdir)
        return cls(
            resource,
            names,
            repository,
            workdir,
            admin_dir,
            refs[names.base],
            refs[names.branch],
            spots,
        )

    @classmethod
    def clear_leftovers(cls, resource: Resource, plan_id: str, root: Path) -> None:
        """Remove what an interrupted :meth:`create` left (a crash between its steps): the
        worktree if git registered it, and the sandbox's refs, so it can be made again. The
        apply branch is never touched."""
        names = _Names.for_plan(plan_id)
        repository = _Repository.find(resource, _subject(resource, plan_id), _base_env())
        git = repository.git
        workdir = root.resolve() / WORKTREE_DIRNAME
        if repository.admin_dir(workdir) is not None:
            git.call("worktree", "remove", "--force", "--", str(workdir))
        if workdir.exists():
            shutil.rmtree(workdir)
        shutil.rmtree(root.resolve() / DIRNAME, ignore_errors=True)
        git.run("worktree", "prune", fix=_FSCK)
        listed = git.run(
            "for-each-ref", "--format=%(refname)", names.checkpoints, names.base, fix=_FSCK
        )
        refs = [check_ref_name(ref) for ref in listed.decode().splitlines()]
        branch = git.call("rev-parse", "--verify", "--quiet", names.branch)
        if branch.returncode == 0:
            refs.append(names.branch)
        if refs:
            git.run("update-ref", "--stdin", stdin=_deletions(refs).encode(), fix=_FSCK)

    # ----------------------------------------------------------------------- properties

    @property
    def resource(self) -> Resource:
        return self._resource

    @property
    def workdir(self) -> Path:
        return self._workdir

    @property
    def base(self) -> str:
        """The commit the sandbox started from (usable as a checkpoint reference)."""
        return self._base

    @property
    def branch(self) -> str:
        """The sandbox branch, ``refs/heads/cleveragents/<plan_id>``."""
        return self._names.branch

    # ---------------------------------------------------------------------- checkpoints

    def checkpoint(self) -> str:
        self._ensure_live()
        self._ensure_on_branch()
        spots = self._spots
        listing, walked = self._stage(list_ignored=spots is not None)
        scanned = spots.scan(listing, spots.load(self._base), walked) if spots else None
        tree = self._write_tree()
        # The Checkpoint-Id line makes every checkpoint a distinct commit, even of an
        # identical state on the same parent in the same second, so dropping one checkpoint
        # (which deletes its ref) never takes another decision's checkpoint with it.
        message = (
            f"cleveragents checkpoint\n\nPlan: {self._names.plan_id}\n"
            f"Checkpoint-Id: {secrets.token_hex(8)}\n"
        )
        commit = self._commit(tree, self._tip, message)
        if spots is not None and scanned is not None:
            spots.record(commit, scanned)
        self._update_refs(
            f"update {self._names.branch} {commit}\n"
            f"create {self._names.checkpoint(commit)} {commit}\n",
            fix="check that the repository is writable (disk space, permissions)",
        )
        self._tip = commit
        self._index_seen = self._index_stamp()
        return commit

    def verify(self, ref: str) -> None:
        self._ensure_live()
        sha = _sha(ref)
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
        if self._spots is not None:
            self._spots.verify(sha)

    def rollback(self, ref: str, *, current: str | None = None) -> None:
        self._ensure_live()
        sha = _sha(ref)
        self._ensure_on_branch()
        spots = self._spots
        target = spots.load(sha) if spots is not None else None
        written = None if current is None else self._roll_from(_sha(current), sha, target)
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
                    reason = _reason(listed.stderr, listed.returncode)
                    raise SandboxError(
                        f"{self._git.subject}: git ls-files failed ({reason})", _FSCK
                    )
                present = spots.scan(listed.stdout, spots.load(self._base), walked[0])
                spots.restore(present, target, None)
            else:
                spots.restore(spots.load(_sha(current or "")), target, written)
        self._index_seen = self._index_stamp()

    def _roll_fully(self, sha: str) -> None:
        """What ``reset --hard`` + ``clean -ffd`` do, from any state of the worktree."""
        name = self._ref_for(sha)
        # Files, index and our branch to the checkpoint, untracked files in the way
        # overwritten; checkout examines the files with the index preload, in parallel,
        # where reset looks at them one after the other.
        branch = _short(self._names.branch)
        done = self._git.call("checkout", "--quiet", "--force", "-B", branch, name, "--")
        if done.returncode != 0:
            self.verify(sha)
            raise SandboxError(
                f"{self._git.subject}: git checkout failed "
                f"({_reason(done.stderr, done.returncode)})",
                f"check that {self._workdir} is writable, then retry the rollback",
            )
        self._tip = sha
        # Runs after the checkout so the .gitignore files of the checkpoint decide what is new.
        self._clean()

    def _roll_from(self, current: str, target: str, record: Record | None) -> list[str] | None:
        """Roll back from checkpoint ``current``, which the caller says the worktree holds
        (the rollback protocol's safety checkpoint, taken just now): only the paths the two
        trees differ in are examined and written. False when that cannot be trusted or git
        refuses; the caller then rolls back fully (which starts from any state). Else the
        paths the two trees differ in: what git wrote.

        Trusted only when ``current`` is the last checkpoint this object took or rolled to
        and the index is the file it left (nothing staged since), so the index holds
        ``current``'s tree with fresh file times. ``read-tree -m -u <target>`` then keeps
        every entry the target shares without looking at its file (the index's cache tree
        lets it skip whole unchanged folders), writes only the rest, and refuses, before
        writing anything, if a file it must write was edited; ``reset --hard`` would examine
        every file. Two read-only commands run beside it, so that ``clean`` (a walk of every
        folder) runs only when it has something to do: ``diff-tree`` names the changed paths
        (a ``.gitignore`` among them changes what ``clean`` takes) and ``ls-files --others
        --directory`` lists what ``clean`` would take, which in the state ``current`` can
        only be empty folders (every other untracked file is in the checkpoint). See
        :func:`_needs_clean` for what it may see of ``read-tree`` at work.
        """
        stamp = self._index_stamp()
        if current != self._tip or stamp is None or stamp != self._index_seen:
            return None
        old, new = self._ref_for(current), self._ref_for(target)
        diff = ("diff-tree", "-r", "-z", "--name-only", "--no-renames", old, new, "--")
        if self._spots is not None and record is not None:
            # The records of the two states say what else differs; clean has no work here:
            # in the state ``current`` the only untracked paths are its recorded folders.
            have = self._spots.load(current)
            if not self._spots.can_start_from(have, record):
                return None
            self._spots.clear_ignored(have, record)  # none is in the way of read-tree
            update, changed = self._git.call_together(("read-tree", "-m", "-u", new), diff)
            if update.returncode != 0:
                return None
            self._moved_to(target)
            if changed.returncode != 0:
                return None  # what git wrote is unknown: the full rollback finds out
            return [os.fsdecode(path) for path in changed.stdout.split(b"\0") if path]
        update, changed, untracked = self._git.call_together(
            ("read-tree", "-m", "-u", new),
            diff,
            ("ls-files", "-z", "--others", "--directory", "--exclude-standard"),
        )
        if update.returncode != 0:
            return None
        self._moved_to(target)
        if (
            changed.returncode != 0
            or untracked.returncode != 0
            or _needs_clean(self._workdir, changed.stdout, untracked.stdout)
        ):
            self._clean()
        return []

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

    def _index_stamp(self) -> tuple[int, int, int] | None:
        """Identity of the worktree's index file: every index write replaces it."""
        try:
            found = (self._admin_dir / "index").stat()
        except OSError:
            return None
        return found.st_ino, found.st_size, found.st_mtime_ns

    def drop_checkpoint(self, ref: str) -> None:
        self._ensure_live()
        sha = _sha(ref)
        if sha == self._base:
            raise SandboxError(
                f"{self._git.subject}: the base commit {sha} is not a droppable checkpoint",
                "drop only references returned by checkpoint()",
            )
        self._update_refs(
            _deletions([self._names.checkpoint(sha)]), fix="check that the repository is writable"
        )
        if self._spots is not None:
            self._spots.drop(sha)

    # -------------------------------------------------------------------------- reading

    def diff(self, old_ref: str, new_ref: str) -> list[Change]:
        self._ensure_live()
        old, new = _sha(old_ref), _sha(new_ref)
        args = ("diff-tree", "-r", "-z", "--no-renames", "--name-status", "--no-ext-diff")
        done = self._git.call(*args, self._ref_for(old), self._ref_for(new), "--")
        if done.returncode != 0:
            self.verify(old)
            self.verify(new)
            reason = _reason(done.stderr, done.returncode)
            raise SandboxError(f"{self._git.subject}: git diff-tree failed ({reason})", _FSCK)
        return _parse_changes(done.stdout)

    def read(self, ref: str, path: str) -> bytes | None:
        self._ensure_live()
        sha = _sha(ref)
        relative = safe_relative_path(path).as_posix()
        name = self._ref_for(sha)
        if "\n" in relative:  # cat-file --batch reads one name a line (-z: git 2.38)
            return self._read_listed(sha, name, relative)
        # One cat-file process answers both "is the checkpoint there?" and "the content".
        query = f"{name}\n{name}:".encode() + os.fsencode(relative) + b"\n"
        out = self._git.run("cat-file", "--batch", stdin=query, fix=_FSCK)
        header, _, rest = out.partition(b"\n")
        found = _BATCH_HEADER.match(header)
        if found is None or found[1] != b"commit":
            self.verify(sha)
            raise SandboxError(f"{self._git.subject}: cannot read checkpoint {sha}", _FSCK)
        header, _, rest = rest[int(found[2]) + 1 :].partition(b"\n")
        found = _BATCH_HEADER.match(header)
        if found is None or found[1] != b"blob":
            return None  # absent, a directory, or a submodule
        return rest[: int(found[2])]

    def _read_listed(self, sha: str, name: str, relative: str) -> bytes | None:
        """``read`` of a name with a line break: its blob from ``ls-tree -z`` (which takes
        the path as it is, no pattern), then its content."""
        done = self._git.call("ls-tree", "-z", "--full-tree", name, "--", relative)
        if done.returncode != 0:
            self.verify(sha)
            raise SandboxError(f"{self._git.subject}: cannot read checkpoint {sha}", _FSCK)
        meta, _, _ = done.stdout.partition(b"\t")
        fields = meta.split()
        if len(fields) != 3 or fields[1] != b"blob":
            return None  # absent, a directory, or a submodule
        return self._git.run("cat-file", "blob", fields[2].decode(), fix=_FSCK)

    def changes_since_baseline(self) -> list[Change]:
        self._ensure_live()
        self._stage()
        out = self._git.run(
            "diff-index",
            "--cached",
            "-z",
            "--no-renames",
            "--name-status",
            self._names.base,
            "--",
            fix=_FSCK,
        )
        return _parse_changes(out)

    # ----------------------------------------------------------------- apply and discard

    def apply(self) -> ApplyResult:
        """Commit the sandbox's current state onto the base as one commit on a new branch,
        ``cleveragents/apply/<plan_id>``; the user's checkout and branches are not touched.
        Calling it again after a success returns the same result (for crash recovery)."""
        self._ensure_live()
        branch = self._names.apply_branch
        self._stage()
        tree = self._write_tree()
        changes = tuple(self._tree_changes(tree))
        if not changes:
            return ApplyResult(
                summary=f"nothing to apply: the sandbox of {self._resource.resource_id} has no "
                f"changes since {self._base[:12]}; no branch was created",
                changes=(),
            )
        landed = self._existing_apply(tree)
        if landed is None:
            message = (
                f"Apply cleveragents plan {self._names.plan_id}\n\n"
                f"{len(changes)} changes made in the sandbox of {self._resource.resource_id}.\n"
            )
            landed = self._commit(tree, self._base, message)
            self._update_refs(
                f"create {branch} {landed}\n",
                fix=f"the branch {_short(branch)} already exists with other content: "
                "merge or delete it (git branch -D), then apply again",
            )
        return ApplyResult(
            summary=f"branch {_short(branch)} at {landed[:12]}: {len(changes)} "
            f"change{'' if len(changes) == 1 else 's'} on top "
            f"of {self._base[:12]}; review and merge it with `git merge {_short(branch)}`",
            changes=changes,
        )

    def discard(self) -> None:
        """Remove the worktree and the sandbox's refs; the apply branch, if any, stays."""
        if self._discarded:
            return
        self._release()
        if self._spots is not None:
            self._spots.discard()
        git = self._repository.git
        removed = git.call("worktree", "remove", "--force", "--", str(self._workdir))
        if removed.returncode != 0:
            # Already deleted by hand, locked by a populated submodule, or its .git file was
            # rewritten: delete the folder ourselves and let git forget it.
            if self._workdir.exists():
                shutil.rmtree(self._workdir)
            git.run("worktree", "prune", fix=_FSCK)
        listed = git.run(
            "for-each-ref",
            "--format=%(refname)",
            self._names.checkpoints,
            self._names.base,
            fix=_FSCK,
        )
        refs = [check_ref_name(ref) for ref in listed.decode().splitlines()]
        git.run(
            "update-ref",
            "--stdin",
            stdin=_deletions([*refs, self._names.branch]).encode(),
            fix=_FSCK,
        )
        self._discarded = True

    # -------------------------------------------------------------------------- helpers

    def _ensure_live(self) -> None:
        if self._discarded:
            raise SandboxError(
                f"{self._git.subject}: the sandbox was discarded",
                "create a new sandbox for the plan",
            )

    def _ensure_on_branch(self) -> None:
        """Point the worktree's HEAD back at our branch if something (an agent running
        ``git checkout``) moved it, so ``reset`` can never move a branch of the user's."""
        try:
            head = (self._admin_dir / "HEAD").read_bytes()
        except OSError:
            head = b""
        if head != f"ref: {self._names.branch}\n".encode():
            self._git.run("symbolic-ref", "HEAD", self._names.branch, fix=_FSCK)

    def _ref_for(self, sha: str) -> str:
        """The ref that keeps checkpoint ``sha`` alive: naming it (rather than the bare SHA)
        makes git refuse anything that is not one of this sandbox's checkpoints."""
        return self._names.base if sha == self._base else self._names.checkpoint(sha)

    def _stage(self, *, list_ignored: bool = False) -> tuple[bytes, Walk | None]:
        """Bring the sandbox's index up to date with its files; with ``list_ignored``, also
        list the ignored paths (:data:`LIST_IGNORED`, run beside ``status``, while the
        record of what git does not keep walks the worktree) and return them.

        ``git status`` (one pass over the files, untracked cache for new ones) names the
        changed paths; only those go to ``update-index``, through stdin, never as arguments.
        Deletions use ``--force-remove`` because a path under a directory that became a
        symlink cannot be examined, only dropped.
        """
        status = (
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--untracked-files=all",
            "--ignore-submodules=dirty",
        )
        if list_ignored:
            spots, walked = self._spots, list[Walk]()
            results = self._git.call_together(
                status,
                LIST_IGNORED,
                meanwhile=(lambda: walked.append(spots.walk())) if spots is not None else None,
            )
            for done, args in zip(results, (status, LIST_IGNORED), strict=True):
                if done.returncode != 0:
                    reason = _reason(done.stderr, done.returncode)
                    raise SandboxError(
                        f"{self._git.subject}: git {args[0]} failed ({reason})", _FSCK
                    )
            out, listing = results[0].stdout, results[1].stdout
            walk = walked[0] if walked else None
        else:
            out, listing, walk = self._git.run(*status, fix=_FSCK), b"", None
        entries = [(entry[:2], entry[3:]) for entry in out.split(b"\0") if entry]
        nested = [path for code, path in entries if code == b"??" and path.endswith(b"/")]
        if nested:
            raise SandboxError(
                f"{self._git.subject}: the sandbox holds a nested git repository at "
                f"{os.fsdecode(nested[0])!r}, which a checkpoint cannot capture",
                "delete it or list it in .gitignore",
            )
        removed = [path for code, path in entries if code[1:] == b"D"]
        updated = [path for code, path in entries if code[1:] not in (b" ", b"D")]
        for options, paths in (("--force-remove",), removed), (("--add", "--replace"), updated):
            if paths:
                self._git.run(
                    "update-index",
                    *options,
                    "-z",
                    "--stdin",
                    stdin=b"\0".join(paths) + b"\0",
                    fix=f"check that {self._workdir} is readable and the disk is not full",
                )
        return listing, walk

    def _write_tree(self) -> str:
        return _sha(self._git.run("write-tree", fix=_FSCK).decode().strip())

    def _commit(self, tree: str, parent: str, message: str) -> str:
        """Write a commit object (the format ``git commit-tree`` writes, never signed)."""
        stamp = f"{IDENTITY[0]} <{IDENTITY[1]}> {int(time.time())} +0000"
        text = f"tree {tree}\nparent {parent}\nauthor {stamp}\ncommitter {stamp}\n\n{message}"
        try:
            self._draft.write_bytes(text.encode())
        except OSError as exc:
            raise SandboxError(
                f"{self._git.subject}: cannot write {self._draft} ({exc.strerror})",
                f"check that {self._draft.parent} exists and is writable",
            ) from None
        [sha] = self._objects.ask(self._draft.name.encode() + b"\n", 1, fix=_FSCK)
        return _sha(sha.decode())

    def _update_refs(self, commands: str, fix: str) -> None:
        """One atomic ref transaction: all of ``commands`` happen, or none."""
        self._refs.ask(f"start\n{commands}commit\n".encode(), 2, fix=fix)

    def _tree_changes(self, tree: str) -> list[Change]:
        args = ("diff-tree", "-r", "-z", "--no-renames", "--name-status", "--no-ext-diff")
        return _parse_changes(self._git.run(*args, self._names.base, tree, "--", fix=_FSCK))

    def _existing_apply(self, tree: str) -> str | None:
        """The commit of an earlier identical apply, so a retried apply is a no-op."""
        branch = self._names.apply_branch
        out = self._git.run("cat-file", "--batch", stdin=f"{branch}\n".encode(), fix=_FSCK)
        header, _, body = out.partition(b"\n")
        found = _BATCH_HEADER.match(header)
        if found is None or found[1] != b"commit":
            return None
        lines = body.partition(b"\n\n")[0].decode().splitlines()
        parents = [line for line in lines if line.startswith("parent ")]
        if lines[:1] != [f"tree {tree}"] or parents != [f"parent {self._base}"]:
            return None
        return header.split()[0].decode()


class GitWorktreeStrategy:
    """Sandboxes git repositories as linked worktrees (``sandbox.strategy: git_worktree``)."""

    name: SandboxStrategyName = SandboxStrategyName.GIT_WORKTREE

    def create(self, resource: Resource, plan_id: str, root: Path) -> GitWorktreeSandbox:
        return GitWorktreeSandbox.create(resource, plan_id, root)

    def open(self, resource: Resource, plan_id: str, root: Path) -> GitWorktreeSandbox:
        return GitWorktreeSandbox.open(resource, plan_id, root)


def _subject(resource: Resource, plan_id: str) -> str:
    return f"git_worktree sandbox of {resource.resource_id} (plan {plan_id})"


def _needs_clean(workdir: Path, changed: bytes, untracked: bytes) -> bool:
    """Whether ``clean`` has work after a rollback from a fresh checkpoint (``_roll_from``).

    ``changed`` is the ``diff-tree -z --name-only`` output of the two checkpoints,
    ``untracked`` the ``ls-files -z --others --directory`` output taken while ``read-tree``
    was writing, so it may list a file ``read-tree`` had just written, or a folder holding
    only such files; those are explained by ``changed``. An entry nothing explains is an
    empty folder (or what only a changed ``.gitignore`` would expose): ``clean`` runs. A
    folder that also holds written files is searched for empty folders once ``read-tree``
    is done.
    """
    paths = set(filter(None, changed.split(b"\0")))
    if any(os.path.basename(path) == b".gitignore" for path in paths):
        return True
    return not all(
        _written_by_read_tree(workdir, entry, paths)
        for entry in filter(None, untracked.split(b"\0"))
    )


def _written_by_read_tree(workdir: Path, entry: bytes, changed: set[bytes]) -> bool:
    if not entry.endswith(b"/"):
        return entry in changed
    if not any(path.startswith(entry) for path in changed):
        return False
    return not _holds_empty_folder(os.path.join(os.fsencode(workdir), entry))


def _holds_empty_folder(folder: bytes) -> bool:
    """Whether ``folder`` is, or holds, a folder with nothing in it but empty folders."""
    try:
        with os.scandir(folder) as entries:
            found = list(entries)
    except OSError:
        return True  # cannot tell: let clean decide
    subfolders = [entry.path for entry in found if entry.is_dir(follow_symlinks=False)]
    return not found or any(_holds_empty_folder(path) for path in subfolders)


def _deletions(refs: list[str]) -> str:
    return "".join(f"delete {check_ref_name(ref)}\n" for ref in refs)


def _release(draft: Path, *pipes: _Pipe) -> None:
    """What a sandbox object holds outside git: its long-running processes and draft file."""
    for pipe in pipes:
        pipe.close()
    draft.unlink(missing_ok=True)
