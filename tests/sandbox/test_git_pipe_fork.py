"""A process forked while a git sandbox's long-running git runs lets go of git's pipes.

The reliability races fork worker processes (multiprocessing's "fork"); a copy of a running
``GitPipe``'s stdin in a worker kept git from seeing the end its parent's close gives it,
and that close waits for git to exit: the full suite hung there once, the parent waiting on
git, git on its stdin, the workers on the parent."""

from __future__ import annotations

import multiprocessing
import os
import stat
import subprocess
from multiprocessing.connection import Connection
from pathlib import Path

from cleveragents_tui.sandbox.git.process import Git, GitPipe


def _report_open(pipe: int, answer: Connection) -> None:
    """Whether any file descriptor of this process is the pipe of inode ``pipe`` (by
    inode: the fd's number may be reused, multiprocessing opens os.devnull in a child)."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found = os.fstat(int(fd))
        except OSError:
            continue
        if stat.S_ISFIFO(found.st_mode) and found.st_ino == pipe:
            held.append(fd)
    answer.send("open" if held else "closed")


def test_a_forked_child_holds_no_copy_of_a_running_git_pipe(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    git = Git(tmp_path, os.environ, "the test repository")
    pipe = GitPipe(git, "cat-file", "--batch-check")
    try:
        assert pipe.ask(b"HEAD\n", 1, fix="-") == [b"HEAD missing"]  # git is running
        stdin = os.fstat(pipe._process.stdin.fileno()).st_ino  # type: ignore[union-attr]
        context = multiprocessing.get_context("fork")
        mine, theirs = context.Pipe()
        child = context.Process(target=_report_open, args=(stdin, theirs))
        child.start()
        said = mine.recv()
        child.join()
        assert said == "closed"
        assert pipe.ask(b"HEAD\n", 1, fix="-") == [b"HEAD missing"]  # still the parent's
    finally:
        pipe.close()
