"""Old attempt vs new attempt of a correction: which decisions changed, and per resource and
per file the changes, unified or side by side, syntax coloured."""

from __future__ import annotations

import difflib
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from cleveragents_tui.engine.diff import CorrectionDiff, FileDiff, correction_diff
from cleveragents_tui.tui.render import one_line
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


def _text(data: bytes | None) -> str | None:
    if data is None:
        return ""
    if b"\0" in data[:8000]:
        return None
    return data.decode("utf-8", errors="replace")


def file_diff(f: FileDiff, side_by_side: bool, theme: str) -> RenderableType:
    path = f.change.path
    head = Text(f"{f.change.kind.value}  {path}", style="bold")
    old, new = _text(f.old), _text(f.new)
    if old is None or new is None:
        return Group(head, Text("  (binary file: contents not shown)", style="dim"))
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
    t.append(f"\nguidance: {c.guidance}\n\n")
    t.append("decisions changed\n", style="bold")
    for row in d.superseded:
        t.append(f"- {row.decision_type}: {one_line(row.chosen_option, 90)}\n", style="red")
    for row in d.replacements:
        t.append(f"+ {row.decision_type}: {one_line(row.chosen_option, 90)}\n", style="green")
    if not (d.superseded or d.replacements):
        t.append("  (none)\n", style="dim")
    return t


class DiffScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="diff.back"),
        Binding("v", "toggle_view", "Unified / side by side", id="diff.view"),
    ]

    def __init__(self, correction_id: str, diff: CorrectionDiff | None = None) -> None:
        super().__init__()
        self.correction_id = correction_id
        self.side_by_side = False
        self.diff = diff

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="diff-body"):
            yield Static("", id="diff-decisions", markup=False)
            yield Static("", id="diff-files", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.title = "diff · old attempt vs new attempt"
        if self.diff is None:
            self.diff = correction_diff(services(self).store, self.correction_id)
        self.render_diff()
        self.query_one("#diff-body").focus()

    def render_diff(self) -> None:
        assert self.diff is not None
        self.sub_title = "side by side" if self.side_by_side else "unified"
        self.query_one("#diff-decisions", Static).update(decisions_text(self.diff))
        theme = "ansi_dark" if self.app.current_theme.dark else "ansi_light"
        parts: list[RenderableType] = []
        for r in self.diff.resources:
            head = Text(f"\n== {r.resource_id}", style="bold magenta")
            if r.note:
                head.append(f"  ({r.note})", style="dim")
            parts.append(head)
            parts.append(Text(f"   {r.old_ref[:12]} → {r.new_ref[:12] or '-'}", style="dim"))
            if not r.files and not r.note:
                parts.append(Text("   (no file changed)", style="dim"))
            parts.extend(file_diff(f, self.side_by_side, theme) for f in r.files)
        if not self.diff.resources:
            parts.append(Text("\nno resource was rolled back by this correction", style="dim"))
        self.query_one("#diff-files", Static).update(Group(*parts))

    def action_toggle_view(self) -> None:
        self.side_by_side = not self.side_by_side
        self.render_diff()
