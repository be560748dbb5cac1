"""Progress lines on stderr while a command runs a plan or corrects one: each decision
recorded, each phase or state change, each child plan, model call and correction step, as
it happens. A plan run by a chat model can take minutes; without them the terminal shows
nothing until it stops.

A thread reads what the plan did (engine/read/run_progress.py) every quarter second, as the
app's replay modal does; when the command's work ends, one last read prints the rest, so
every decision the run recorded is shown once, whatever the timing. Shown when stderr is a
terminal, unless ``agents --no-progress``; ``agents --progress`` shows them anywhere.

On a terminal, the last row also says what the plan waits on while nothing is recorded — a
model's reply, a long tool call — and for how long (``⋯ waiting for openai:gpt-4o-mini ·
12 s``); it is redrawn in place and cleared before every line, so it never reaches a file.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cleveragents_tui.cli.context import CLEAR_ROW, CliContext, echo
from cleveragents_tui.cli.interrupt import pausing_on_ctrl_c
from cleveragents_tui.domain.display import printable

if TYPE_CHECKING:  # imported only when the lines are shown
    from cleveragents_tui.engine.read.run_progress import RunWatch
    from cleveragents_tui.views.progress import ProgressLines

POLL_SECONDS = 0.25
F = TypeVar("F", bound=Callable[..., Any])


class Progress:
    """Prints what the followed plans do; :meth:`follow` names one (a runner's start calls
    it through ``RunOptions.on_start``). Off (no watch): follows nothing, prints nothing."""

    def __init__(
        self,
        watch: RunWatch | None = None,
        width: int = 0,
        on_follow: Callable[[str], None] | None = None,  # Ctrl+C's plan (cli/interrupt.py)
        *,
        waits_shown: bool = False,  # stderr is a terminal: the row of what it waits on
    ) -> None:
        self._watch = watch
        self._on_follow = on_follow
        self._waits_shown = waits_shown
        self._wait_drawn = False
        self._lines: ProgressLines | None = None
        if watch is not None:
            from cleveragents_tui.views.progress import ProgressLines

            self._lines = ProgressLines(None, width)
        self._printing = threading.Lock()  # the thread's last read and the final one

    def follow(self, plan_ref: str) -> None:
        if self._on_follow is not None:
            self._on_follow(plan_ref)
        if self._watch is None or self._lines is None:
            return
        plan_id = self._watch.follow(plan_ref)
        if self._lines.root_plan_id is None:
            self._lines.root_plan_id = plan_id  # the command's plan: its lines need no name

    def print_news(self, *, last: bool = False) -> None:
        """Print what happened since the last read; ``last``: the command's work is over,
        so no wait is shown any more."""
        if self._watch is None or self._lines is None:
            return
        with self._printing:
            for happened in self._watch.news():
                line = self._lines.line(happened)
                if line is not None:
                    self._clear_wait()
                    echo(line, err=True)
            if self._waits_shown and not last:
                self._draw_wait(self._watch, self._lines)
            else:
                self._clear_wait()

    def _draw_wait(self, watch: RunWatch, lines: ProgressLines) -> None:
        shown = watch.waiting()
        if not shown:
            self._clear_wait()
            return
        click.echo(CLEAR_ROW + printable(lines.wait_line(shown[-1])), nl=False, err=True)
        self._wait_drawn = True

    def _clear_wait(self) -> None:
        if self._wait_drawn:
            click.echo(CLEAR_ROW, nl=False, err=True)
            self._wait_drawn = False


def progress_option(command: F) -> F:
    """``agents plan run P --no-progress`` as ``agents --no-progress plan run P``: the option
    after the command's name sets the global one, as ``--format`` does (cli/json_output.py)."""

    def take(context: click.Context, _: click.Parameter, value: bool | None) -> None:
        found = context.find_object(CliContext)
        if value is not None and found is not None:
            found.progress = value

    return click.option(
        "--progress/--no-progress",
        default=None,
        expose_value=False,
        callback=take,
        help="Print each decision and step on stderr as it happens. "
        "Default: when stderr is a terminal.",
    )(command)


def shown(cli: CliContext) -> bool:
    """``--progress`` / ``--no-progress`` as given, else whether stderr is a terminal."""
    if cli.progress is not None:
        return cli.progress
    return sys.stderr.isatty()


def _width() -> int:
    """A line's length: the terminal's width, so that no line wraps; else the views' limit."""
    from cleveragents_tui.views.progress import LINE_LIMIT

    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError):  # not a terminal (--progress into a file or a pipe)
        return LINE_LIMIT
    return max(40, columns - 2)  # the "…" of a line cut short fits too


@contextmanager
def following(cli: CliContext, plan_ref: str | None = None) -> Iterator[Progress]:
    """Progress lines for the plan ``plan_ref`` (an id or a unique prefix; None: the plan the
    command's runner starts on, named through :meth:`Progress.follow`) while the block runs;
    Ctrl+C pauses that plan (cli/interrupt.py)."""
    with pausing_on_ctrl_c(cli) as interrupts, _lines(cli, interrupts.follow) as progress:
        if plan_ref is not None:
            progress.follow(plan_ref)
        yield progress


@contextmanager
def _lines(cli: CliContext, on_follow: Callable[[str], None]) -> Iterator[Progress]:
    if not shown(cli):
        yield Progress(on_follow=on_follow)
        return
    from cleveragents_tui.engine.read.run_progress import RunWatch

    waits_shown = sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
    progress = Progress(RunWatch(cli.store), _width(), on_follow, waits_shown=waits_shown)
    done = threading.Event()

    def poll() -> None:
        while not done.wait(POLL_SECONDS):
            try:
                progress.print_news()
            except Exception:  # a progress line is not worth the command: the final
                return  # read, in the command's thread, reports a lasting failure

    thread = threading.Thread(target=poll, name="agents-progress", daemon=True)
    thread.start()
    try:
        yield progress
    except BaseException:
        done.set()
        thread.join()
        with suppress(Exception):  # the command's own error is the one to report
            progress.print_news(last=True)
        raise
    done.set()
    thread.join()
    progress.print_news(last=True)
