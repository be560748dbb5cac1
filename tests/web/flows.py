"""Steps the browser tests share, written so that no key or click races the app.

Textual applies some focus changes a moment after the event that caused them (a dialog's
initial focus, a radio set's focus on click), so a test that sends its next key at once
can type into the wrong widget. Each step here waits for the screen to show the state it
needs — in text, or where only colour tells (a pressed radio button, a focused border) in
the terminal cells' colours — before the next one.
"""

from __future__ import annotations

from tests.web.browser import Terminal

REVERT = "revert: roll back what depended on it"
APPEND = "append: add a corrective child plan"
GUIDANCE_FIELD = "e.g. use a greeter class"  # the guidance input's placeholder
DOT, BORDER = -3, -6  # "▊ ▐●▌ label": the radio's dot and the radio set's left border


APPEND_CHOSEN = """([append, revert, dot, border, on, off]) => {
    const colours = (needle, offset) => window.__agentsColors(needle, offset) || [null, null];
    return colours(append, dot)[0] === on && colours(revert, dot)[0] === off
        // focused: the chosen label is highlighted in the colour of the set's focused border
        && colours(append, 0)[1] === colours(append, border)[0];
}"""


def choose_append(terminal: Terminal) -> None:
    """Click the append mode; wait until it is pressed and its radio set has the focus
    (the set takes the focus a moment after the click, which a quick next click loses to)."""
    terminal.wait_for("Correct decision", APPEND)
    on, _ = terminal.colors(REVERT, DOT)  # revert starts pressed: its dot shows "on"
    off, _ = terminal.colors(APPEND, DOT)
    terminal.click(APPEND)
    terminal.wait_until(
        APPEND_CHOSEN, [APPEND, REVERT, DOT, BORDER, on, off], "append was never chosen"
    )


def give_guidance(terminal: Terminal, guidance: str) -> None:
    """Click the guidance field, type, see every character arrive, submit."""
    terminal.click(GUIDANCE_FIELD)
    terminal.type(guidance)
    terminal.wait_for(guidance)
    terminal.press("Enter")


def confirm_impact(terminal: Terminal, warnings: int) -> None:
    """The impact preview, then each warning: y to each (their focus starts on No). The
    decisions these flows correct have one alternative, which guidance cannot select: the
    preview needs it picked (1) before it goes on."""
    terminal.wait_for("Impact preview", "1. ")
    terminal.press("1")
    terminal.press("y")
    for number in range(1, warnings + 1):
        terminal.wait_for(f"Warning {number} of {warnings}")
        terminal.press("y")
