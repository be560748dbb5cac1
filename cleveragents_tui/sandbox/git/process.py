"""Running git safely for the git_worktree sandbox: a fixed configuration and environment
(no hooks, no fsmonitor, no inherited ``GIT_*`` redirection), git's own reason on failure as
a :class:`SandboxError`, and long-running ``--stdin`` processes for cheap requests."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TypeVar

from cleveragents_tui import failpoints
from cleveragents_tui.sandbox.base import SandboxError
from cleveragents_tui.sandbox.safety import UnsafeInputError, check_sha

_T = TypeVar("_T")

IDENTITY = ("cleveragents", "cleveragents@localhost")
FSCK = "check the repository with `git fsck`; if it is damaged, discard the sandbox"

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
BATCH_HEADER = re.compile(rb"^[0-9a-f]{40}(?:[0-9a-f]{24})? ([a-z]+) ([0-9]+)$")


def full_sha(value: str) -> str:
    """``check_sha``, refusing a line break too: its ``$`` also matches before a final newline,
    and SHAs and refs travel here in line-based stdin protocols (update-ref, cat-file)."""
    sha = check_sha(value)
    if "\n" in sha:
        raise UnsafeInputError(f"{value!r} is not a full git object id", "use the 40-character SHA")
    return sha


def base_env() -> dict[str, str]:
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


def reason_of(stderr: bytes, returncode: int) -> str:
    """git's own one-line explanation: the first ``fatal:``/``error:`` line, else the first."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line.removeprefix(prefix)[:300]
    return lines[0][:300] if lines else f"exit code {returncode}"


def _executable(path: str) -> str:
    """git found on ``path`` once: a bare ``git`` makes every start try each folder of PATH
    before git's own (a failed exec apiece). A PATH with a relative folder is searched at
    each start, as before, from the folder git runs in; if git is missing, starting fails
    as before."""
    folders = path.split(os.pathsep)
    if not all(os.path.isabs(folder) for folder in folders):
        return "git"
    return shutil.which("git", path=path) or "git"


class Git:
    """Runs git in one directory with one fixed environment; failures become SandboxError."""

    def __init__(self, cwd: Path, env: Mapping[str, str], subject: str) -> None:
        self.cwd = cwd
        self.env = dict(env)
        self.subject = subject
        self.exe = _executable(self.env.get("PATH", os.defpath))

    def call(self, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        failpoints.hit("git.call", args[0])
        try:
            return subprocess.run(
                [self.exe, *_CONFIG, *args],
                cwd=self.cwd,
                env=self.env,
                input=stdin,
                capture_output=True,
                check=False,
                process_group=0,  # a Ctrl+C at the terminal is the command's, not git's
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
                        [self.exe, *_CONFIG, *args],
                        cwd=self.cwd,
                        env=self.env,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        process_group=0,
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
            reason = reason_of(done.stderr, done.returncode)
            raise SandboxError(f"{self.subject}: git {args[0]} failed ({reason})", fix)
        return done.stdout


class GitPipe:
    """One long-running git command answering requests on stdin, one line per answer.

    Starting git costs about 2 ms (more than the work of a ref update); a request to a
    running ``update-ref --stdin`` or ``hash-object --stdin-paths`` costs about 0.1 ms. A
    process that dies (git exits on the first error, undoing an open transaction) is
    reported with its stderr and restarted by the next request.
    """

    def __init__(self, git: Git, *args: str) -> None:
        self._git = git
        self._args = args
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None
        self._lock = threading.Lock()
        _RUNNING.add(self)

    def _let_go_in_child(self) -> None:
        """In a process forked from this one: close the copies of git's pipes, leave git to
        the parent. A copy of its stdin held open here would keep git from ever seeing the
        end its parent's close gives it, and that close waits for git to exit."""
        self._lock = threading.Lock()  # held by another thread at the fork, perhaps
        process, self._process = self._process, None
        if process is not None:
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()

    def ask(self, request: bytes, answers: int, fix: str) -> list[bytes]:
        """``answers`` lines in reply to ``request``, each without its line break."""

        def read(stdout: IO[bytes]) -> list[bytes] | None:
            lines = [stdout.readline() for _ in range(answers)]
            return (
                [line[:-1] for line in lines]
                if all(line.endswith(b"\n") for line in lines)
                else None
            )

        return self._exchange(request, read, fix)

    def ask_through(self, request: bytes, end: bytes, fix: str) -> bytes:
        """What comes back before ``end``, which ``request`` must end with a line git echoes
        unread (``diff-tree --stdin`` passes through a line that is not an object name);
        for answers of many NUL-terminated names, which may hold line breaks."""

        def read(stdout: IO[bytes]) -> bytes | None:
            got = bytearray()  # grown in place: bytes += would copy it all for every chunk
            while not got.endswith(end):
                chunk = stdout.read1(65536)  # type: ignore[attr-defined]
                if not chunk:
                    return None
                got += chunk
            del got[-len(end) :]
            return bytes(got)

        return self._exchange(request + end, read, fix)

    def _exchange(self, request: bytes, read: Callable[[IO[bytes]], _T | None], fix: str) -> _T:
        failpoints.hit("git.call", self._args[0])
        with self._lock:
            process = self._process
            if process is None or process.poll() is not None:
                process = self._start()
            assert process.stdin is not None and process.stdout is not None
            answer = None
            try:
                process.stdin.write(request)
                process.stdin.flush()
                answer = read(process.stdout)
            except OSError:
                pass
            if answer is not None:
                return answer
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
                [self._git.exe, *_CONFIG, *self._args],
                cwd=self._git.cwd,
                env=self._git.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                process_group=0,
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
        reason = reason_of(self._stderr.read(), returncode)
        self._stderr.close()
        return reason


_RUNNING: weakref.WeakSet[GitPipe] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for pipe in list(_RUNNING):
        pipe._let_go_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)


def release(draft: Path, *pipes: GitPipe) -> None:
    """What a sandbox object holds outside git: its long-running processes and draft file."""
    for pipe in pipes:
        pipe.close()
    draft.unlink(missing_ok=True)
