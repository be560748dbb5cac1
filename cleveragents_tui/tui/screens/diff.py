"""Old attempt vs new attempt of a correction: which decisions changed, and per resource and
per file the changes — at the corrected decision and in the final states, as the correction
recorded them (engine/core/replay_snapshots.py) — unified or side by side, syntax coloured."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Header, Static
from textual.worker import Worker

from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.core.diff import CorrectionDiff, correction_diff
from cleveragents_tui.engine.core.file_diff import FileDiff, ResourceDiff, shown_path
from cleveragents_tui.engine.core.replay_snapshots import AT_DECISION, FINAL
from cleveragents_tui.tui.screens.base import AgentsScreen
from cleveragents_tui.tui.services import services
from cleveragents_tui.tui.widgets.keys_footer import KeysFooter
from cleveragents_tui.views.diff import diff_view, resource_view
from cleveragents_tui.views.rich_text import to_rich


def file_diff(f: FileDiff, side_by_side: bool, theme: str) -> RenderableType:
    path = shown_path(f.change.path)  # one line, whatever the name holds
    head = Text(f"{f.change.kind.value}  {path}", style="bold")
    if f.summary is not None:  # a binary or very large file (engine/core/file_diff.py)
        return Group(head, Text(f"  ({f.summary})", style="dim"))
    old, new = printable(f.old or ""), printable(f.new or "")
    if not side_by_side:
        lines = difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            f"old/{path}",
            f"new/{path}",
        )
        body = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
        return Group(
            head, Syntax(body or "(no textual change)\n", "diff", theme=theme, word_wrap=True)
        )
    return Group(head, side_by_side_table(aligned_rows(old, new)))


# unchanged lines kept around each change; a longer unchanged run shows as one "⋯" row
CONTEXT = 3
# rows drawn at most per file (a 5,000-line file stays one fast frame); then "… N more lines"
MAX_ROWS = 400
MARK_STYLES = {"-": "red", "+": "green", "~": "yellow", " ": "", "⋯": "dim"}


@dataclass(frozen=True)
class SideRow:
    """One aligned row of the side-by-side view: old line ``old_no`` beside new line
    ``new_no`` (None: a filler, that side has no line here). ``mark``: ``' '`` unchanged,
    ``'~'`` changed, ``'-'`` removed, ``'+'`` added, ``'⋯'`` a run of unchanged lines
    left out (its count in ``old_text``)."""

    old_no: int | None
    old_text: str
    mark: str
    new_no: int | None
    new_text: str


def _lines(text: str) -> list[str]:
    """The file's lines as numbered by an editor (only ``\n`` ends a line)."""
    lines = text.split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def aligned_rows(old: str, new: str) -> list[SideRow]:
    """Old and new aligned by difflib's opcodes: equal lines side by side, a replaced block
    paired line by line (the longer side's rest beside blank fillers), removed lines beside
    fillers on the new side, added ones beside fillers on the old side."""
    a, b = _lines(old), _lines(new)
    rows: list[SideRow] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b).get_opcodes():
        if tag == "equal":
            rows.extend(_equal(a, i1, i2, j1, first=not rows, last=i2 == len(a)))
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            has_old, has_new = i < i2, j < j2
            mark = "~" if has_old and has_new else "-" if has_old else "+"
            rows.append(
                SideRow(
                    i + 1 if has_old else None,
                    a[i] if has_old else "",
                    mark,
                    j + 1 if has_new else None,
                    b[j] if has_new else "",
                )
            )
    return rows


def _equal(a: list[str], i1: int, i2: int, j1: int, *, first: bool, last: bool) -> list[SideRow]:
    """An unchanged run: whole when short, else its CONTEXT lines next to each change and
    one ``⋯`` row for the lines between."""
    rows = [SideRow(i + 1, a[i], " ", j1 + i - i1 + 1, a[i]) for i in range(i1, i2)]
    keep_head = 0 if first else CONTEXT
    keep_tail = 0 if last else CONTEXT
    if len(rows) <= keep_head + keep_tail + 1:
        return rows
    skipped = len(rows) - keep_head - keep_tail
    gap = SideRow(None, f"{skipped:,} unchanged lines", "⋯", None, "")
    return [*rows[:keep_head], gap, *rows[len(rows) - keep_tail :]]


def side_by_side_table(rows: list[SideRow]) -> RenderableType:
    """The rows as a table: line numbers, the gutter mark, and each side styled by its
    change; at most MAX_ROWS rows, then how many were left out."""
    table = Table(expand=True, show_lines=False, pad_edge=False, box=None, padding=(0, 1, 0, 0))
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("old attempt", ratio=1, overflow="fold")
    table.add_column("", no_wrap=True)
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("new attempt", ratio=1, overflow="fold")
    for row in rows[:MAX_ROWS]:
        style = MARK_STYLES[row.mark]
        if row.mark == "⋯":
            table.add_row("", Text(f"⋯ {row.old_text}", style=style), "⋯", "", "")
            continue
        old_style = style if row.mark in "-~" else ""
        new_style = style if row.mark in "+~" else ""
        table.add_row(
            "" if row.old_no is None else str(row.old_no),
            Text(row.old_text, style=old_style),
            Text(row.mark, style=f"bold {style}".strip()),
            "" if row.new_no is None else str(row.new_no),
            Text(row.new_text, style=new_style),
        )
    if len(rows) > MAX_ROWS:
        return Group(table, Text(f"… {len(rows) - MAX_ROWS:,} more lines", style="dim"))
    return table


class DiffScreen(AgentsScreen):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="diff.back"),
        Binding("v", "toggle_view", "Unified / side by side", id="diff.view"),
    ]

    def __init__(self, correction_id: str, diff: CorrectionDiff | None = None) -> None:
        super().__init__()
        self.correction_id = correction_id
        self.side_by_side = False
        self.diff = diff
        self.loader: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="diff-body"):
            yield Static("", id="diff-decisions", markup=False)
            yield Static("", id="diff-files", markup=False)
        yield KeysFooter()

    def on_mount(self) -> None:
        self.title = "diff · old attempt vs new attempt"
        self.query_one("#diff-body").focus()
        if self.diff is None:
            self.query_one("#diff-decisions", Static).update(Text("loading…", style="dim"))
            self.loader = self.load_diff()
        else:
            self.render_diff()

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False)
    def load_diff(self) -> None:
        """Read the diff the correction recorded, off the event loop."""
        try:
            diff = correction_diff(services(self).store, self.correction_id)
        except UserError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.app.call_from_thread(self._show, diff)

    def _show(self, diff: CorrectionDiff) -> None:
        self.diff = diff
        self.render_diff()

    def render_diff(self) -> None:
        if self.diff is None:
            return  # still loading
        self.sub_title = "side by side" if self.side_by_side else "unified"
        # what `agents plan diff` prints above the files (views/diff.py)
        self.query_one("#diff-decisions", Static).update(to_rich(diff_view(self.diff)))
        theme = "ansi_dark" if self.app.current_theme.dark else "ansi_light"
        parts: list[RenderableType] = []
        sections = [] if self.diff.at_decision is None else [(AT_DECISION, self.diff.at_decision)]
        for title, resources in [*sections, (FINAL, self.diff.final)]:
            parts.append(Text(f"\n{title}", style="bold underline"))
            parts.extend(self._resource(r, theme) for r in resources)
            if not resources:
                parts.append(Text("no resource was rolled back by this correction", style="dim"))
        self.query_one("#diff-files", Static).update(Group(*parts))

    def _resource(self, r: ResourceDiff, theme: str) -> RenderableType:
        parts: list[RenderableType] = [Text(""), to_rich(resource_view(r))]
        parts.extend(file_diff(f, self.side_by_side, theme) for f in r.files)
        return Group(*parts)

    def action_toggle_view(self) -> None:
        self.side_by_side = not self.side_by_side
        self.render_diff()
