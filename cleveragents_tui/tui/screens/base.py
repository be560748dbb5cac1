"""What every full screen of the app shares: Help and Quit first in the footer, and a
worker's unexpected error shown as a notification."""

from __future__ import annotations

from textual.binding import ActiveBinding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

FIRST_KEYS = ("question_mark", "q")  # Help, Quit


class AgentsScreen(Screen[None]):
    """A screen whose footer starts with `? Help` and `q Quit`: the footer is cut at the
    right edge of a narrow terminal, and these two must stay findable at 80 columns."""

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        bindings = super().active_bindings
        first = {key: bindings[key] for key in FIRST_KEYS if key in bindings}
        return first | bindings

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A worker that failed in a way its code did not foresee (the database went away
        mid-action): a notification, never a traceback. The screens' workers are declared
        with ``exit_on_error=False`` so the app goes on."""
        if event.state is WorkerState.ERROR:
            self.notify(
                str(event.worker.error), title="Something went wrong", severity="error", timeout=10
            )
