"""The strategy dialog shows the strategy actor's alternatives as the text they are: square
brackets are not markup (a stray closing tag stopped the dialog opening) and control
characters are escaped, as everywhere else an agent's text is shown."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.widgets import RadioButton

from cleveragents_tui.tui.modals.strategy import StrategyDialog
from tests.tui.conftest import SIZE

pytestmark = pytest.mark.anyio


async def test_alternatives_are_shown_as_written_with_control_characters_escaped() -> None:
    app: App[None] = App()
    alternatives = ("use [bold]classes[/bold]", "a [/stray] tag", "colour\x1b[31m")
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(StrategyDialog("How?", "one file", alternatives))
        await pilot.pause()
        labels = [button.label.plain for button in app.screen.query(RadioButton)]
    assert labels[:2] == ["use [bold]classes[/bold]", "a [/stray] tag"]
    assert "\x1b" not in labels[2] and labels[2].startswith("colour")
