"""Long styled text drawn only where it is seen: a ``Static`` renders every line of its
text to lay itself out and again to draw its first frame (the impact preview naming 200
of 10,000 affected decisions: ~60 ms of the event loop before the dialog showed). This
one measures a line by its length, draws a line when it comes into view, and draws it as
``Static`` would (the same Textual rendering, line by line)."""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widgets import Static


class LongText(Static):
    """A ``Static`` of ``text`` (``content`` is that text) whose lines are drawn lazily."""

    def __init__(self, text: Text, *, id: str | None = None) -> None:
        super().__init__(text, id=id, markup=False)
        self._lines = text.split("\n", allow_blank=True)
        self._widest = max((line.cell_len for line in self._lines), default=0)
        self._width = -1  # the width the rows below are laid out for
        self._rows: list[tuple[int, int]] = []  # each row shown: (line, row of that line)
        self._drawn: dict[int, list[Strip]] = {}  # line → its rows, at ``_width``

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return self._widest

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        self._lay_out(width)
        return len(self._rows)

    def _lay_out(self, width: int) -> None:
        """Rows for ``width``: a line that fits takes one, only a longer one is drawn
        (wrapped) to count its rows."""
        if width == self._width:
            return
        self._width, self._drawn, self._rows = width, {}, []
        for n, line in enumerate(self._lines):
            rows = 1 if line.cell_len <= width else len(self._draw(n))
            self._rows.extend((n, k) for k in range(rows))

    def _draw(self, n: int) -> list[Strip]:
        """Line ``n``'s rows at the laid-out width (a blank line: one blank row)."""
        if n not in self._drawn:
            visual = visualize(self, self._lines[n], markup=False)
            strips = Visual.to_strips(self, visual, self._width, None, self.visual_style)
            self._drawn[n] = strips or [Strip.blank(self._width)]
        return self._drawn[n]

    def render_line(self, y: int) -> Strip:
        self._lay_out(self.size.width)
        if y >= len(self._rows):
            return Strip.blank(self.size.width, self.visual_style.rich_style)
        n, k = self._rows[y]
        strips = self._draw(n)
        return strips[k] if k < len(strips) else Strip.blank(self._width)
