"""``agents serve`` as a user runs it: a real process on a free port, read line by line."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

READY_PREFIX = "agents serve: "
START_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (the shell textual-serve starts, the app under it)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier}
        found |= frontier
    return found


@dataclass
class ServeProcess:
    process: subprocess.Popen[str]
    stderr_path: Path
    lines: queue.Queue[str] = field(default_factory=queue.Queue)

    def next_line(self, timeout: float = START_TIMEOUT) -> str:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"agents serve said nothing more:\n{self.stderr()}") from None

    def stderr(self) -> str:
        return self.stderr_path.read_text("utf-8", errors="replace")

    def stop(self) -> int:
        """SIGTERM, as a service manager stops it; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=60)


def start_serve(
    database: str, port: int, *args: str, workdir: Path, env: dict[str, str] | None = None
) -> tuple[ServeProcess, str]:
    """Start ``agents --db DATABASE serve --port PORT ARGS`` and wait for its first line
    (printed once it listens); returns the process and that line."""
    stderr_path = workdir / f"serve-{port}.stderr"
    command = [sys.executable, "-m", "cleveragents_tui", "--db", database, "serve"]
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            [*command, "--port", str(port), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, **(env or {})},
        )
    served = ServeProcess(process, stderr_path)

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            served.lines.put(line.rstrip("\n"))
        served.lines.put("")  # end of output

    threading.Thread(target=pump, daemon=True).start()
    first = served.next_line()
    if not first.startswith(READY_PREFIX):
        served.stop()
        raise AssertionError(f"agents serve did not start: {first!r}\n{served.stderr()}")
    return served, first
