"""``agents tui PLAN`` in a real terminal: the app opens on that plan's decision tree."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from click.testing import CliRunner

from cleveragents_tui.cli import cli

DEADLINE_S = 60.0  # a bound on a hung app, not a timing assertion


def _screen_until(fd: int, *wanted: bytes) -> bytes:
    """What the app wrote to the terminal, read until each of ``wanted`` is in it."""
    seen = b""
    end = time.monotonic() + DEADLINE_S
    while not all(w in seen for w in wanted):
        ready, _, _ = select.select([fd], [], [], max(0.0, end - time.monotonic()))
        if not ready:
            raise AssertionError(f"{wanted!r} never shown; the screen had {seen[-2000:]!r}")
        try:
            seen += os.read(fd, 65536)
        except OSError as exc:  # EIO: the app closed the terminal, it ended
            raise AssertionError(f"the app ended before {wanted!r}: {seen[-2000:]!r}") from exc
    return seen


def _quits(app: subprocess.Popen[bytes], fd: int) -> int:
    """``q`` typed until the app ends (under load a key typed while the screen is still being
    set up was seen to go unread); its exit code."""
    for _ in range(5):
        os.write(fd, b"q")
        with contextlib.suppress(subprocess.TimeoutExpired):
            return app.wait(timeout=DEADLINE_S / 5)
    raise AssertionError("q never quit the app")


def test_agents_tui_plan_opens_on_that_plans_tree(tmp_path: Path) -> None:
    db = str(tmp_path / "agents.db")
    assert CliRunner().invoke(cli, ["--db", db, "demo-data"]).exit_code == 0
    listed = CliRunner().invoke(cli, ["--db", db, "--format=json", "plan", "list"])
    plan = next(p for p in json.loads(listed.stdout)["plans"] if p["parent_plan_id"] is None)
    main, term = pty.openpty()
    fcntl.ioctl(term, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "HOME": str(tmp_path)}
    app = subprocess.Popen(
        [sys.executable, "-m", "cleveragents_tui", "--db", db, "tui", plan["plan_id"][:20]],
        stdin=term, stdout=term, stderr=term, env=env, close_fds=True,
    )  # fmt: skip
    os.close(term)
    try:
        # the tree's root decision (only the plan's screen shows decision types), and the
        # details of the decision under the cursor: the plan's screen is up
        _screen_until(main, b"prompt_definition", b"question")
        assert _quits(app, main) == 0
    finally:
        app.kill()
        os.close(main)
