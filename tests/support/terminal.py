"""``agents ARGS`` in a pseudo-terminal of its own, as a person runs it at a shell: the
terminal is its session's controlling one (so a typed Ctrl+C signals its foreground process
group), and what it prints is read as it prints it."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import threading

WAIT_SECONDS = 120  # a bound on a failure, never waited in a passing run


class Terminal:
    def __init__(
        self, args: list[str], env: dict[str, str], rows: int = 50, columns: int = 200
    ) -> None:
        pid, self.fd = pty.fork()
        if pid == 0:  # the child: its own session, the terminal its controlling one
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
            # as a shell starts a foreground command: SIGINT not ignored (pytest may run
            # under nohup or as a background job, which ignore it, and exec keeps that)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            argv = [sys.executable, "-m", "cleveragents_tui", *args]
            os.execve(sys.executable, argv, env)  # noqa: S606 (no shell: an argv)
        self.pid = pid
        self.text = ""
        self._status: int | None = None
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self.fd], [], [], WAIT_SECONDS)
            try:
                chunk = os.read(self.fd, 65536) if ready else b""
            except OSError:  # EIO: the command ended and closed the terminal
                chunk = b""
            with self._changed:
                self.text += chunk.decode(errors="replace").replace("\r\n", "\n")
                self._changed.notify_all()
            if not chunk:
                return

    def wait_for(self, *wanted: str) -> None:
        """Until each of ``wanted`` has been printed."""
        with self._changed:
            shown = self._changed.wait_for(
                lambda: all(w in self.text for w in wanted), WAIT_SECONDS
            )
            if not shown:
                raise AssertionError(f"{wanted!r} never shown:\n{self.text[-4000:]}")

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def ended(self, seconds: float = WAIT_SECONDS) -> int | None:
        """The command's exit code once it has closed the terminal within ``seconds``;
        None while it runs."""
        self._reader.join(seconds)
        if self._reader.is_alive():
            return None
        if self._status is None:
            _, status = os.waitpid(self.pid, 0)
            self._status = os.waitstatus_to_exitcode(status)
            os.close(self.fd)
        return self._status

    def exit_code(self) -> int:
        code = self.ended()
        if code is None:
            raise AssertionError(f"the command never ended:\n{self.text[-4000:]}")
        return code

    def close(self) -> None:
        """Kill the command if it still runs (a test that failed halfway)."""
        if self._status is None:
            os.kill(self.pid, signal.SIGKILL)
            self.ended()
