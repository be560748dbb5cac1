"""The diff view's side by side (``v``) aligns the old and the new attempt line by line and
marks each change (issue 17): a user reads old line N beside new line M, sees what was
removed, added or changed, and a 5,000-line file stays one short view."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from textual.widgets import Static

from cleveragents_tui.domain.correction import CorrectionAttempt
from cleveragents_tui.domain.enums import CorrectionMode, CorrectionStatus
from cleveragents_tui.engine.core.diff import CorrectionDiff
from cleveragents_tui.engine.core.file_diff import FileDiff, ResourceDiff
from cleveragents_tui.sandbox.base import Change, ChangeKind
from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.app import AgentsApp
from cleveragents_tui.tui.screens.diff import DiffScreen
from tests.tui.fixed_data import PLAN, T0, uid

pytestmark = pytest.mark.anyio

OLD = "".join(f"line {n}\n" for n in range(1, 5001))
# line 10 removed, line 2500 changed, a line added after line 4000, an escape in line 4500
NEW = (
    OLD.replace("line 10\n", "")
    .replace("line 2500\n", "LINE 2500\n")
    .replace("line 4000\n", "line 4000\nadded\n")
    .replace("line 4500\n", "line \x1b]0;owned\x07 4500\n")
)


def _diff(old: str, new: str) -> CorrectionDiff:
    correction = CorrectionAttempt(
        correction_id=uid(1, "C"),
        plan_id=PLAN,
        target_decision_id=uid(6),
        mode=CorrectionMode.REVERT,
        guidance="g",
        attempt=2,
        status=CorrectionStatus.SUCCEEDED,
        requested_by="tester",
        created_at=T0,
        finished_at=T0,
    )
    f = FileDiff(Change("big.txt", ChangeKind.MODIFIED), old, new)
    return CorrectionDiff(
        correction=correction,
        superseded=[],
        replacements=[],
        at_decision=None,
        final=[ResourceDiff("demo/hello-cli", "a" * 40, "b" * 40, [f])],
    )


async def _side_by_side_lines(store: Store, old: str, new: str) -> list[str]:
    """The diff view's files section after ``v``, as the terminal shows it (plain text)."""
    app = AgentsApp(store, user="tester", poll_seconds=None)
    async with app.run_test(size=(160, 40)) as pilot:
        await app.push_screen(DiffScreen(uid(1, "C"), diff=_diff(old, new)))
        await pilot.pause()
        await pilot.press("v")
        await pilot.pause()
        assert isinstance(app.screen, DiffScreen) and app.screen.side_by_side
        console = Console(width=160, color_system=None, file=io.StringIO())
        with console.capture() as captured:
            console.print(app.screen.query_one("#diff-files", Static).content)
        return [line.rstrip() for line in captured.get().splitlines()]


def _row(lines: list[str], *cells: str) -> None:
    """Some shown line holds ``cells`` in order, separated by blanks only."""
    want = " ".join(cells).split()
    assert any(line.split() == want for line in lines), f"no row {want}"


async def test_lines_are_aligned_and_marked(sqlite_store: Store) -> None:
    lines = await _side_by_side_lines(sqlite_store, OLD, NEW)
    _row(lines, "9 line 9", "9 line 9")  # unchanged, side by side
    _row(lines, "10 line 10", "-")  # removed: a mark and a blank filler on the new side
    _row(lines, "11 line 11", "10 line 11")  # below it, old 11 beside new 10
    _row(lines, "2500 line 2500", "~", "2499 LINE 2500")  # changed
    _row(lines, "+", "4000 added")  # added: a blank filler on the old side
    _row(lines, "4001 line 4001", "4001 line 4001")
    _row(lines, "4500 line 4500", "~", "4500 line \\x1b]0;owned\\x07 4500")  # escaped


async def test_a_large_file_shows_its_changes_not_every_line(sqlite_store: Store) -> None:
    lines = await _side_by_side_lines(sqlite_store, OLD, NEW)
    assert any("⋯ 2,483 unchanged lines" in line for line in lines)
    assert len(lines) < 80
    rewritten = "".join(f"other {n}\n" for n in range(1, 5001))
    lines = await _side_by_side_lines(sqlite_store, OLD, rewritten)
    assert any(line.strip() == "… 4,600 more lines" for line in lines)
