"""The command tools: run a program in a sandbox's working directory.

``local/run-command`` changes the sandbox (it is a write tool, refused in Strategize);
``local/run-tests`` is a validation: it reports no write, but declares ``runs:tests``, so
a revert that rolls back what it checked runs it again (docs/corrections.md, "What a revert
keeps"). Both run the argv list with
no shell, in the workdir, with a minimal environment (see :mod:`.process`); ok means exit
status 0. Resources without a working directory (overlay, databases) are refused.

Python writes no bytecode in a run (``PYTHONDONTWRITEBYTECODE``): a file rewritten within
the second at the same size (a fix, a correction) would otherwise run from the stale
``__pycache__`` the previous run left, and the bytecode would be applied. The bytecode of
what the program imports from outside the sandbox (the standard library, installed
packages) is read as usual; a fresh cache folder per run made every run compile all of it
(4× the import time of pytest, SQLAlchemy and pydantic).

Python imports the plan's files first: the working directory and its ``src/`` lead
``PYTHONPATH``. A project installed in the environment the command runs in (``pip install
-e .`` points at your checkout; ``pip install .`` copies it) would otherwise be what its
tests import, so they passed or failed on the code the plan did not write.

This is not an operating-system sandbox: the program runs as the user, and what it does
outside its working directory is not prevented, only not encouraged.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from cleveragents_tui.actors.base import ToolContext, ToolOutcome
from cleveragents_tui.actors.process import minimal_environment, run_bounded
from cleveragents_tui.actors.tool_support import (
    OUTPUT_LIMIT,
    Arguments,
    BuiltinTool,
    Param,
    ParamType,
    changed,
    open_sandbox,
    refused,
    strategy_of,
)
from cleveragents_tui.domain.tool import ToolCategory, ToolSpec

DEFAULT_TIMEOUT: Final = 60.0
MAX_TIMEOUT: Final = 600.0
_TAIL: Final = 16 * 1024  # of OUTPUT_LIMIT, the bytes kept from the end of the output

_RESOURCE = Param("resource", ParamType.TEXT, "the resource id (namespace/name) of the plan")
_ARGV = Param("argv", ParamType.ARGV, "the program and its arguments, as a list (no shell is used)")
_TIMEOUT = Param(
    "timeout_seconds",
    ParamType.NUMBER,
    f"stop the command after this many seconds (default {DEFAULT_TIMEOUT:g}, at most "
    f"{MAX_TIMEOUT:g})",
    required=False,
)


# no stale bytecode (above); output in the order it was written: a program that prints,
# then exits with a message, would otherwise show its printed lines after the message (its
# stdout to a pipe is flushed at exit), and the failure's question would quote them
_PYTHON: Final = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}


def _python_path(workdir: Path) -> dict[str, str]:
    """``PYTHONPATH``: ``workdir/src`` (when there is one), then ``workdir`` — ahead of
    installed packages, so the project's own modules come from the sandbox. A folder whose
    path holds the separator cannot be named in it and is left out."""
    folders = [f for f in (workdir / "src", workdir) if f.is_dir()]
    named = [str(f) for f in folders if os.pathsep not in str(f)]
    return {"PYTHONPATH": os.pathsep.join(named)} if named else {}


class _CommandTool(BuiltinTool):
    def perform(self, context: ToolContext, arguments: Arguments) -> ToolOutcome:
        name = self.spec.name
        resource_id = arguments.text("resource")
        argv = arguments.argv("argv")
        timeout = arguments.number("timeout_seconds", DEFAULT_TIMEOUT)
        if not 0 < timeout <= MAX_TIMEOUT:
            return refused(f"{name}: timeout_seconds must be above 0 and at most {MAX_TIMEOUT:g}")
        sandbox = open_sandbox(context, resource_id)
        workdir = sandbox.workdir
        if workdir is None or not workdir.is_dir():
            return refused(
                f"{name}: resource {resource_id} (strategy {strategy_of(sandbox)}) has no "
                "working directory to run a command in; use the file tools (overlay) or "
                "local/run-sql (databases)"
            )
        try:
            result = run_bounded(
                argv,
                workdir,
                {**minimal_environment(workdir), **_PYTHON, **_python_path(workdir)},
                timeout,
                head=OUTPUT_LIMIT - _TAIL,
                tail=_TAIL,
            )
        except OSError as exc:  # it did not start: nothing ran, nothing changed
            reason = exc.strerror or type(exc).__name__
            return refused(f"{name}: cannot run {argv[0]!r}: {reason}")
        writes = changed(context, resource_id) if self.spec.writes else ()
        text = result.output.decode("utf-8", "replace")  # already bounded by the capture
        if result.timed_out:
            status = f"timed out after {timeout:g} s; the command and its processes were killed"
        elif result.returncode is not None and result.returncode < 0:
            status = f"killed by signal {-result.returncode}"
        else:
            status = f"exit status {result.returncode}"
        return ToolOutcome(
            ok=result.returncode == 0, output=f"{status}\n{text}".rstrip("\n"), writes=writes
        )


class RunCommand(_CommandTool):
    spec = ToolSpec(
        name="local/run-command",
        category=ToolCategory.COMMAND,
        description="Run a program (argv list, no shell) in the resource's working directory.",
        writes=True,
        side_effects=("writes:files",),
    )
    params = (_RESOURCE, _ARGV, _TIMEOUT)


class RunTests(_CommandTool):
    spec = ToolSpec(
        name="local/run-tests",
        category=ToolCategory.VALIDATION,
        description="Run a test command (argv list, no shell); ok when it exits with status 0.",
        # its verdict is about the files it ran on (and it leaves caches there)
        side_effects=("runs:tests",),
    )
    params = (_RESOURCE, _ARGV, _TIMEOUT)
