"""A plan whose replay waits for the test: its one Execute step runs a command that, once
the test has made ``gate`` a FIFO, reports the process that runs it (the tab's app) and its
own on the ``reached`` FIFO and then blocks reading ``gate`` until the test opens it for
writing.

The plan's first run (done by the test, before the gate exists) passes straight through; a
correction of that step replays it, so a replay stays in the middle of its work for as long
as the test needs — without a sleep or a timing: FIFOs block in the kernel until the other
end opens.
"""

from __future__ import annotations

import errno
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.resource import Resource
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.store.store import Store
from tests.web.browser import TIMEOUT_MS
from tests.web.conftest import Demo

REPO = "local/repo"
WORK = "Work on the repository"  # the step's question
CHOSEN = "work it"  # its one alternative, which the test corrects


def action(gate: Path, reached: Path) -> Action:
    script = (
        f"echo work >> work.txt; if [ -p {gate} ]; then echo $PPID $$ > {reached}; "
        f"exec cat {gate}; fi"
    )
    call = {
        "tool": "local/run-command",
        "arguments": {"resource": REPO, "argv": ["sh", "-c", script]},
    }
    return Action.model_validate(
        {
            "name": "local/gated",
            "prompt": "work on the repository",
            "resources": [REPO],
            "decisions": [
                {
                    "key": "strategy",
                    "type": "strategy_choice",
                    "question": "How?",
                    "alternatives": [{"option": "by hand", "match": ["hand"]}],
                },
                {
                    "key": "work",
                    "type": "tool_invocation",
                    "parent": "strategy",
                    "question": WORK,
                    "alternatives": [{"option": CHOSEN, "tool_calls": [call]}],
                },
            ],
        }
    )


@dataclass
class Gate:
    """The two FIFOs: ``reached`` (the command says it is running) and ``gate`` (it waits)."""

    gate: Path
    reached: Path

    def open(self) -> None:
        """The step passes straight through again."""
        self.gate.unlink()
        self.reached.unlink()

    def close(self) -> None:
        """From now on a replay of the step blocks (the first run did not)."""
        os.mkfifo(self.gate)
        os.mkfifo(self.reached)

    @contextmanager
    def watching(self) -> Iterator[_Reached]:
        """Open ``reached`` before the replay is started, so the command can report."""
        fd = os.open(self.reached, os.O_RDONLY | os.O_NONBLOCK)
        try:
            yield _Reached(fd)
        finally:
            os.close(fd)

    def release(self) -> bool:
        """Let a command blocked on the gate go on (it reads end of file); False when no
        command waits there."""
        try:
            fd = os.open(self.gate, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: nobody has it open for reading
                raise
            return False
        os.close(fd)
        return True


@dataclass
class _Reached:
    fd: int

    def pids(self) -> tuple[int, int]:
        """Wait until the replayed command runs; the process that started it (the app) and
        the command's. (A FIFO never written to is not readable: select waits for the
        command's line.)"""
        ready, _, _ = select.select([self.fd], [], [], TIMEOUT_MS / 1000)
        assert ready, "the replay never reached the gated step"
        app, command = os.read(self.fd, 64).decode().split()
        return int(app), int(command)


def agents(demo: Demo, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI on the demo's database, as the person would run it next."""
    return subprocess.run(
        [sys.executable, "-m", "cleveragents_tui", "--db", demo.database, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_gated(
    database: str, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Demo, Gate]]:
    """A git repository, the gated plan run to its Apply gate on ``database`` (sandboxes in
    ``workdir/sandboxes``, which the server's tabs inherit), and its gate, still open."""
    sandboxes = workdir / "sandboxes"
    monkeypatch.setenv("AGENTS_SANDBOX_DIR", str(sandboxes))
    repo = workdir / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(
        repo,
        "-c",
        "user.email=t@example.invalid",
        "-c",
        "user.name=T",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "initial",
    )
    gate = Gate(workdir / "gate", workdir / "reached")
    store = Store.open(database)
    with store.unit_of_work(write=True) as uow:
        uow.resources.add(
            Resource(
                resource_id=REPO, kind="git", location=str(repo), sandbox_strategy="git_worktree"
            )
        )
        uow.commit()
    options = RunOptions(sandbox_base=sandboxes)
    plan_id = start_plan(
        store, action(gate.gate, gate.reached), profile_override="auto", options=options
    ).plan_id
    try:
        yield Demo(database, store, plan_id, workdir), gate
    finally:
        with suppress(OSError):
            gate.release()  # a command a killed app left behind ends too
        store.close()
