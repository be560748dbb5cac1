"""Old attempt vs new attempt of a correction: which decisions changed, and per resource and
per file the changes — at the corrected decision and in the final states, as the correction
recorded them (engine/diff.py) — unified or side by side, syntax coloured."""

from __future__ import annotations

import difflib
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static
from textual.worker import Worker

from cleveragents_tui.domain.display import printable
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.engine.diff import (
    AT_DECISION,
    FINAL,
    NO_AT_DECISION,
    CorrectionDiff,
    FileDiff,
    ResourceDiff,
    correction_diff,
    shown_path,
)
from cleveragents_tui.tui.render import one_line
from cleveragents_tui.tui.screens.base import AgentsScreen
from cleveragents_tui.tui.services import services

LEXERS = {
    ".py": "python",
    ".md": "markdown",
    ".toml": "toml",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".json": "json",
    ".sql": "sql",
    ".txt": "text",
    ".sh": "bash",
    ".cfg": "ini",
}


def _lexer(path: str) -> str:
    dot = path.rfind(".")
    return LEXERS.get(path[dot:].lower(), "text") if dot >= 0 else "text"


def file_diff(f: FileDiff, side_by_side: bool, theme: str) -> RenderableType:
    path = shown_path(f.change.path)  # one line, whatever the name holds
    head = Text(f"{f.change.kind.value}  {path}", style="bold")
    if f.summary is not None:  # a binary or very large file (engine/diff.py)
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
    table = Table(expand=True, show_lines=False, pad_edge=False)
    table.add_column("old attempt", ratio=1, overflow="fold")
    table.add_column("new attempt", ratio=1, overflow="fold")
    lexer = _lexer(path)
    table.add_row(
        Syntax(old or " ", lexer, theme=theme, line_numbers=True, word_wrap=True),
        Syntax(new or " ", lexer, theme=theme, line_numbers=True, word_wrap=True),
    )
    return Group(head, table)


def decisions_text(d: CorrectionDiff) -> Text:
    c = d.correction
    t = Text()
    t.append(f"correction {c.correction_id}", style="bold")
    t.append(
        f" · {c.mode.value} of {c.target_decision_id} · {c.status.value} · attempt {c.attempt}"
    )
    if c.requested_by:
        t.append(f" · by {c.requested_by}")
    t.append(f"\nguidance: {printable(c.guidance)}\n\n")
    t.append("decisions changed\n", style="bold")
    for row in d.superseded:
        t.append(f"- {row.decision_type}: {one_line(row.chosen_option, 90)}\n", style="red")
    for row in d.replacements:
        t.append(f"+ {row.decision_type}: {one_line(row.chosen_option, 90)}\n", style="green")
    if not (d.superseded or d.replacements):
        t.append("  (none)\n", style="dim")
    return t


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
        yield Footer()

    def on_mount(self) -> None:
        self.title = "diff · old attempt vs new attempt"
        self.query_one("#diff-body").focus()
        if self.diff is None:
            self.query_one("#diff-decisions", Static).update(Text("loading…", style="dim"))
            self.loader = self.load_diff()
        else:
            self.render_diff()

    @work(thread=True, exclusive=True, group="diff")
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
        self.query_one("#diff-decisions", Static).update(decisions_text(self.diff))
        theme = "ansi_dark" if self.app.current_theme.dark else "ansi_light"
        parts: list[RenderableType] = []
        if self.diff.unfinished:
            parts.append(Text(f"\n{self.diff.unfinished}", style="yellow"))
        if self.diff.note:
            parts.append(Text(f"\n{printable(self.diff.note)}", style="dim"))
        elif self.diff.at_decision is None:
            parts.append(Text(f"\n{NO_AT_DECISION}", style="dim"))
        sections = [] if self.diff.at_decision is None else [(AT_DECISION, self.diff.at_decision)]
        for title, resources in [*sections, (FINAL, self.diff.final)]:
            parts.append(Text(f"\n{title}", style="bold underline"))
            parts.extend(self._resource(r, theme) for r in resources)
            if not resources:
                parts.append(Text("no resource was rolled back by this correction", style="dim"))
        self.query_one("#diff-files", Static).update(Group(*parts))

    def _resource(self, r: ResourceDiff, theme: str) -> RenderableType:
        head = Text(f"\n== {r.resource_id}", style="bold magenta")
        if r.note:
            head.append(f"  ({printable(r.note)})", style="dim")
        parts: list[RenderableType] = [
            head,
            Text(f"   {r.old_ref[:12] or '-'} → {r.new_ref[:12] or '-'}", style="dim"),
        ]
        if not r.files and not r.note:
            parts.append(Text("   (no file changed)", style="dim"))
        parts.extend(file_diff(f, self.side_by_side, theme) for f in r.files)
        return Group(*parts)

    def action_toggle_view(self) -> None:
        self.side_by_side = not self.side_by_side
        self.render_diff()
