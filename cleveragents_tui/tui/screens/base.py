"""What every full screen of the app shares: Help and Quit first in the footer."""

from __future__ import annotations

from textual.binding import ActiveBinding
from textual.screen import Screen

FIRST_KEYS = ("question_mark", "q")  # Help, Quit


class AgentsScreen(Screen[None]):
    """A screen whose footer starts with `? Help` and `q Quit`: the footer is cut at the
    right edge of a narrow terminal, and these two must stay findable at 80 columns."""

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        bindings = super().active_bindings
        first = {key: bindings[key] for key in FIRST_KEYS if key in bindings}
        return first | bindings
