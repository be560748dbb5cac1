"""A one-line "working…" notice with a spinner, shown only when a wait gets long enough to
be noticed (issue 22): a quick answer never flashes it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import LoadingIndicator, Static

NOTICE_AFTER = 0.2  # seconds a wait runs before it says so


class Working(Horizontal):
    DEFAULT_CSS = """
    Working { display: none; height: 1; background: $boost; }
    Working.-shown { display: block; }
    Working LoadingIndicator { width: 8; height: 1; min-height: 1; }
    Working Static { width: 1fr; color: $text-muted; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield LoadingIndicator()
        yield Static("", markup=False)

    def start(self, what: str) -> None:
        """Say ``what`` is running if it still is after :data:`NOTICE_AFTER`."""
        self.stop()
        self.query_one(Static).update(what)
        self._timer = self.set_timer(NOTICE_AFTER, lambda: self.set_class(True, "-shown"))

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self.set_class(False, "-shown")

    @property
    def shown(self) -> bool:
        return self.has_class("-shown")
