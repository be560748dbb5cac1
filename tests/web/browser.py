"""Debian's Chromium driven by Playwright, and the app's terminal as text.

textual-serve's page draws the app with xterm.js on a canvas and keeps its ``Terminal``
object private. An init script (test-only) catches each xterm ``Terminal`` when its
constructor sets ``_core``, so a test can read the screen's text from the terminal's own
buffer: what the page shows, cell by cell, not the bytes on the wire.
"""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import Browser, Page, Playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeout

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1280, "height": 800}  # about 140 x 38 cells: the wide layout
TIMEOUT_MS = int(os.environ.get("AGENTS_WEB_TEST_TIMEOUT_MS", "90000"))  # app start on 2 cores

CAPTURE_TERMINALS = """
(() => {
  const terminals = [];
  Object.defineProperty(Object.prototype, "_core", {
    configurable: true,
    get() { return undefined; },
    set(value) {
      Object.defineProperty(this, "_core", { value, writable: true, configurable: true });
      terminals.push(this);  // also addons' objects: terminal() picks the terminal
    },
  });
  const terminal = () => terminals.find((t) => {
    try { return Boolean(t.buffer && t.buffer.active && t.rows); } catch { return false; }
  });
  const lines = () => {
    const t = terminal();
    const rows = [];
    for (let row = 0; t && row < t.rows; row++) {
      const line = t.buffer.active.getLine(row);
      rows.push(line ? line.translateToString(true) : "");
    }
    return rows;
  };
  window.__agentsScreen = () => lines().join("\\n");
  window.__agentsCellOf = (needle) => {
    const rows = lines();
    const row = rows.findIndex((line) => line.includes(needle));
    const t = terminal();
    return row < 0 ? null : [row, rows[row].indexOf(needle), t.rows, t.cols];
  };
  window.__agentsColors = (needle, offset) => {  // [fg, bg] of a cell, relative to a text
    const at = window.__agentsCellOf(needle);
    if (!at) return null;
    const cell = terminal().buffer.active.getLine(at[0]).getCell(at[1] + offset);
    return cell ? [cell.getFgColor(), cell.getBgColor()] : null;
  };
})();
"""

SHOWS_ALL = (
    "needles => needles.every(n => window.__agentsScreen && window.__agentsScreen().includes(n))"
)
SHOWS_NONE = (
    "needles => window.__agentsScreen && !needles.some(n => window.__agentsScreen().includes(n))"
)


def launch(playwright: Playwright) -> Browser:
    """Chromium from Debian's package (never a downloaded one); Playwright gives every
    launch a fresh, empty profile directory."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)


class Terminal:
    """The app in one browser page: read its screen, wait for text, type keys."""

    def __init__(self, page: Page) -> None:
        self.page = page
        page.add_init_script(CAPTURE_TERMINALS)

    def open(self, url: str) -> None:
        self.page.goto(url)
        self.page.locator(".xterm-helper-textarea").focus()

    def text(self) -> str:
        return str(self.page.evaluate("() => window.__agentsScreen()"))

    def wait_until(self, script: str, arg: object, what: str) -> str:
        """Wait until the JavaScript predicate ``script(arg)`` holds (it may use
        ``window.__agentsScreen()`` and ``window.__agentsColors(needle, offset)``)."""
        try:
            self.page.wait_for_function(script, arg=arg, timeout=TIMEOUT_MS)
        except PlaywrightTimeout:
            raise AssertionError(f"{what}; the screen shows:\n{self.text()}") from None
        return self.text()

    def wait_for(self, *needles: str) -> str:
        """Wait until every needle is on the screen; return the screen's text."""
        return self.wait_until(SHOWS_ALL, list(needles), f"the screen never showed {needles!r}")

    def wait_gone(self, *needles: str) -> str:
        return self.wait_until(SHOWS_NONE, list(needles), f"the screen kept showing {needles!r}")

    def click(self, needle: str) -> None:
        """Click the middle of the first cell of ``needle``, as a person would.

        A dialog sets its initial focus just after its first paint: a key sent at once
        can land before it. A click puts the focus where the test means it to be."""
        self.wait_for(needle)
        row, column, rows, columns = self.page.evaluate("n => window.__agentsCellOf(n)", needle)
        box = self.page.locator(".xterm-screen").bounding_box()
        assert box is not None
        self.page.mouse.click(
            box["x"] + (column + 0.5) * box["width"] / columns,
            box["y"] + (row + 0.5) * box["height"] / rows,
        )

    def colors(self, needle: str, offset: int = 0) -> tuple[int, int]:
        """The (foreground, background) colours of the cell ``offset`` cells from where
        ``needle`` starts: the only trace of some states (a pressed radio button, a
        focused widget) on a terminal screen."""
        found = self.page.evaluate("([n, o]) => window.__agentsColors(n, o)", [needle, offset])
        assert found is not None, f"{needle!r} is not on the screen:\n{self.text()}"
        return int(found[0]), int(found[1])

    def press(self, *keys: str) -> None:
        for key in keys:
            self.page.keyboard.press(key)

    def type(self, text: str) -> None:
        self.page.keyboard.type(text)
