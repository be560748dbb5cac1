"""The strategy dialog and the impact preview show a decision's alternatives as the text they are: square
brackets are not markup (a stray closing tag stopped the dialog opening) and control
characters are escaped, as everywhere else an agent's text is shown."""

from __future__ import annotations

from dataclasses import replace

import pytest
from textual.app import App
from textual.widgets import RadioButton

from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.engine.correct.guidance import Alternatives
from cleveragents_tui.tui.modals.impact import ImpactModal
from cleveragents_tui.tui.modals.strategy import StrategyDialog
from tests.support.impacts import revert_impact
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


async def test_the_impact_preview_shows_alternatives_as_written() -> None:
    app: App[None] = App()
    found = Alternatives(
        key="[/k]", options=("a [/stray] tag", "bell\x07"), selected=1, chosen=True, fallback=1
    )
    impact = replace(
        revert_impact("p", ["d"], phase=Phase.EXECUTE, step_key="s", guidance="g"),
        alternatives=found,
    )
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(ImpactModal(impact))
        await pilot.pause()
        labels = [button.label.plain for button in app.screen.query(RadioButton)]
    assert labels[0] == "1. a [/stray] tag"
    assert "\x07" not in labels[1] and labels[1].startswith("2. bell")
