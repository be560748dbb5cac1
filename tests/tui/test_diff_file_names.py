"""The app's diff view shows every file name on one line, escaped as the CLI shows it
(issue 20, item 4): a line break, a tab or a byte that is not UTF-8 in a name never breaks
the view's lines or reaches the terminal."""

from __future__ import annotations

import io

import pytest
from rich.console import Console, RenderableType

from cleveragents_tui.engine.core.file_diff import FileDiff
from cleveragents_tui.sandbox.base import Change, ChangeKind
from cleveragents_tui.tui.screens.diff import file_diff

NAMES = {
    "odd\nname.txt": '"odd\\nname.txt"',
    "tab\there.txt": '"tab\\there.txt"',
    "latin-\udcff.txt": '"latin-\\xff.txt"',  # the byte 0xff, as Python decodes a name
    "-leading-dash.txt": "-leading-dash.txt",
}


def shown(renderable: RenderableType) -> str:
    console = Console(width=120, color_system=None, file=io.StringIO())
    with console.capture() as captured:
        console.print(renderable)
    return captured.get()


@pytest.mark.parametrize("side_by_side", [False, True])
@pytest.mark.parametrize(("name", "escaped"), NAMES.items())
def test_a_file_name_is_one_escaped_line_in_the_app(
    name: str, escaped: str, side_by_side: bool
) -> None:
    diff = FileDiff(Change(name, ChangeKind.MODIFIED), "one\n", "two\n")
    text = shown(file_diff(diff, side_by_side, "ansi_dark"))
    assert text.splitlines()[0] == f"modified  {escaped}"
    assert name not in text or name == escaped
