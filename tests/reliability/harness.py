"""The parent side of the crash and fault loops: child processes, work folders, figures.

Children come from fork servers (``scenario.py``), one per worker, started on first use and
ended when the test process exits. Two workers, each with its own work folder and server,
share a loop's iterations: on the two-core CI machine the loop takes half the time.

Work folders hold absolute paths (the resources' locations, git worktree links, sandbox
state files), so a folder cannot be copied elsewhere: a prepared state is saved once and
put back *at the same path* before each iteration.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from cleveragents_tui.domain.errors import NotFoundError
from cleveragents_tui.failpoints import ENV_VAR
from cleveragents_tui.store.store import Store
from tests.reliability import scenario

FIGURES_ENV = "AGENTS_RELIABILITY_FIGURES"
SOAK_ENV = "AGENTS_SOAK_ITERATIONS"
KILLED = -signal.SIGKILL
J = TypeVar("J")
R = TypeVar("R")


class _ForkServer:
    """``python -m tests.reliability.scenario`` running, asked one child at a time."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None

    def run(self, target: Callable[..., None], *args: str) -> int:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.reliability.scenario"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                cwd=Path(__file__).resolve().parents[2],
                env={k: v for k, v in os.environ.items() if k != ENV_VAR},
            )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write(json.dumps([target.__name__, *args]) + "\n")
        self._process.stdin.flush()
        answer = self._process.stdout.readline()
        assert answer, f"the fork server ended (exit {self._process.wait()})"
        code: int = json.loads(answer)
        return code

    def close(self) -> None:
        if self._process is not None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process.wait(timeout=60)
            self._process = None


_SERVERS: list[_ForkServer] = []


def _server(number: int) -> _ForkServer:
    while len(_SERVERS) <= number:
        server = _ForkServer()
        atexit.register(server.close)
        _SERVERS.append(server)
    return _SERVERS[number]


def soak_iterations(default: int) -> int:
    """How many random crash points or repetitions to try: more in ``nox -s soak``."""
    return int(os.environ.get(SOAK_ENV, default))


class Worker:
    """A work folder at a fixed path, its saved states, and the fork server it asks."""

    def __init__(self, root: Path, number: int) -> None:
        self.number = number
        self.path = root / f"worker{number}" / "work"
        self._saved = root / f"worker{number}" / "saved"
        self._server = _server(number)
        self.run_hits: dict[str, int] = {}

    def reset(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        self.path.mkdir(parents=True)

    def prepare(self) -> None:
        """Run the demo plan to its Apply gate and save that state as ``gate``; its failpoint
        hits are ``run_hits``."""
        self.reset()
        code, acks = self.run_stage("run", None)
        assert code == 0 and acks[-1] == ["done"], acks
        self.save("gate")
        self.run_hits = hits_of(acks)

    def save(self, name: str) -> None:
        shutil.copytree(self.path, self._saved / name, symlinks=True)

    def restore(self, name: str) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        shutil.copytree(self._saved / name, self.path, symlinks=True)

    def child(self, target: Callable[..., None], *args: str) -> int:
        """Run ``scenario.<target>(*args)`` in a fresh child; its exit code (-9: killed)."""
        return self._server.run(target, *args)

    def run_stage(self, stage: str, failpoint: str | None) -> tuple[int, list[list[str]]]:
        """One stage in a child; (exit code, acknowledgement lines split in words)."""
        acks = self.path.parent / "acks.txt"
        acks.unlink(missing_ok=True)
        code = self.child(scenario.stage, str(self.path), stage, failpoint or "", str(acks))
        lines = acks.read_text("utf-8").splitlines() if acks.exists() else []
        return code, [line.split(" ", 2) for line in lines]

    def in_child(self, target: Callable[..., None], *args: str) -> dict[str, Any]:
        """Run a scenario function that writes a JSON result; the result."""
        out = self.path.parent / "result.json"
        out.unlink(missing_ok=True)
        code = self.child(target, str(self.path), *args, str(out))
        assert code == 0, f"{target.__name__} failed in its child (exit {code})"
        result: dict[str, Any] = json.loads(out.read_text("utf-8"))
        return result

    def unacknowledged(self, acks: list[list[str]]) -> list[str]:
        """The acknowledged operations the store does not hold (read without a sandbox)."""
        store = Store.open(str(self.path / "agents.db"))
        lost = []
        try:
            with store.unit_of_work() as uow:
                for words in acks:
                    try:
                        if words[0] == "decision":
                            uow.decisions.get(words[1])
                        elif words[0] == "correction":
                            assert uow.corrections.get(words[1]).status.value == words[2]
                        elif words[0] == "applied":
                            assert uow.plans.get(words[1]).state.value == "applied"
                    except (NotFoundError, AssertionError):
                        lost.append(" ".join(words))
        finally:
            store.close()
        return lost


def workers(root: Path) -> list[Worker]:
    """One worker per core, at most two (CI machines have two)."""
    return [Worker(root, n) for n in range(min(2, os.cpu_count() or 1))]


def on_each(team: list[Worker], prepare: Callable[[Worker], R]) -> list[R]:
    """``prepare(worker)`` on every worker at once."""
    with ThreadPoolExecutor(len(team)) as pool:
        return list(pool.map(prepare, team))


def share(team: list[Worker], jobs: list[J], do: Callable[[Worker, J], R]) -> list[R]:
    """``do(worker, job)`` for every job, the workers taking the next job as they finish;
    the results in the jobs' order."""
    queue = list(enumerate(jobs))
    results: dict[int, R] = {}
    lock = threading.Lock()

    def drain(worker: Worker) -> None:
        while True:
            with lock:
                if not queue:
                    return
                index, job = queue.pop(0)
            results[index] = do(worker, job)

    on_each(team, drain)
    return [results[i] for i in range(len(jobs))]


def hits_of(acks: list[list[str]]) -> dict[str, int]:
    line = next(words for words in acks if words[0] == "hits")
    loaded: dict[str, int] = json.loads(" ".join(line[1:]))
    return loaded


def figures_dir() -> Path:
    """``$AGENTS_RELIABILITY_FIGURES`` or ``<tmp>/cleveragents-reliability``."""
    configured = os.environ.get(FIGURES_ENV)
    path = (
        Path(configured) if configured else Path(tempfile.gettempdir()) / "cleveragents-reliability"
    )
    path.mkdir(parents=True, exist_ok=True)
    return path


def record_figures(name: str, **counts: Any) -> Path:
    """Write one test's figures as JSON and print them on one ``RELIABILITY-FIGURES`` line."""
    path = figures_dir() / f"{name}.json"
    run = {
        "recorded_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "soak_iterations": int(os.environ[SOAK_ENV]) if os.environ.get(SOAK_ENV) else None,
    }
    body = json.dumps({"test": name, **run, **counts}, sort_keys=True)
    path.write_text(body + "\n", encoding="utf-8")
    print(f"RELIABILITY-FIGURES {body}")
    return path
