"""Running one command for a tool: no shell, a minimal environment, bounded time and output.

The command runs in its own session (process group) with stdin closed and stdout and stderr
merged into one pipe. Output is kept up to ``head`` bytes from the start and ``tail`` bytes
from the end, so a flood of output costs no memory. When the command exits, or the time is
up, the whole process group is killed: nothing the command started keeps running.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

POLL_SECONDS: Final = 0.05  # without pidfd_open: how often the command's exit is checked
DRAIN_SECONDS: Final = 2.0  # after the kill, how long to collect output still in the pipe
_CHUNK: Final = 65536


def minimal_environment(home: Path) -> dict[str, str]:
    """PATH (the caller's, else the system default), HOME and LANG; nothing else inherited."""
    return {"PATH": os.environ.get("PATH") or os.defpath, "HOME": str(home), "LANG": "C.UTF-8"}


@dataclass(frozen=True)
class ProcessResult:
    returncode: int | None  # None when the command was stopped at its timeout
    output: bytes  # head + marker + tail when the output was longer than head + tail
    timed_out: bool


class _Capture:
    def __init__(self, head: int, tail: int) -> None:
        self._head_limit, self._tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self._tail_limit:
            self.tail += chunk
            del self.tail[: max(0, len(self.tail) - self._tail_limit)]

    def output(self) -> bytes:
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return bytes(self.head + self.tail)
        marker = f"\n[... {omitted} bytes of output omitted ...]\n".encode()
        return bytes(self.head) + marker + bytes(self.tail)


def run_bounded(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,
    *,
    head: int,
    tail: int,
) -> ProcessResult:
    """Run ``argv`` (no shell); raises OSError when it cannot start (not found, not allowed)."""
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        close_fds=True,
    )
    assert process.stdout is not None
    capture = _Capture(head, tail)
    deadline = time.monotonic() + timeout
    timed_out = False
    pidfd = _pidfd(process.pid)
    with process.stdout as pipe, selectors.DefaultSelector() as selector:
        fd = pipe.fileno()
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
        if pidfd is not None:
            selector.register(pidfd, selectors.EVENT_READ)  # readable once the command exits
        output_open = True
        try:
            while not _exited(process.pid):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                wait = remaining if pidfd is not None else min(remaining, POLL_SECONDS)
                for key, _ in selector.select(wait):
                    if key.fd == fd and not _read_into(fd, capture):
                        selector.unregister(fd)  # output closed; the command may still run
                        output_open = False
        finally:
            _kill_group(process)  # the exited command is not reaped yet: its group id is ours
            process.wait()
            if pidfd is not None:
                selector.unregister(pidfd)
                os.close(pidfd)
        if output_open:
            _drain(selector, fd, capture, time.monotonic() + DRAIN_SECONDS)
    return ProcessResult(
        returncode=None if timed_out else process.returncode,
        output=capture.output(),
        timed_out=timed_out,
    )


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux 5.3+), else None."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd: int = opener(pid)
    except OSError:
        return None
    return fd


def _exited(pid: int) -> bool:
    """Whether the command exited, without reaping it (so its process group id stays ours)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _read_into(fd: int, capture: _Capture) -> bool:
    """Read what the pipe has; False at end of output."""
    try:
        chunk = os.read(fd, _CHUNK)
    except BlockingIOError:
        return True
    if not chunk:
        return False
    capture.add(chunk)
    return True


def _drain(selector: selectors.BaseSelector, fd: int, capture: _Capture, until: float) -> None:
    """Collect output still buffered in the pipe, until its end (or ``until``)."""
    while (remaining := until - time.monotonic()) > 0:
        if selector.select(remaining) and not _read_into(fd, capture):
            return


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's process group (its session), whatever is left of it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
