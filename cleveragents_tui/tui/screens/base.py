"""What every full screen of the app shares: Help and Quit first in the footer, and a
worker's unexpected error shown as a notification; and how the list screens load."""

from __future__ import annotations

from textual import work
from textual.binding import ActiveBinding
from textual.message import Message
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from cleveragents_tui.store.store import Store
from cleveragents_tui.tui.messages import LoadFailed, StoreChanged
from cleveragents_tui.tui.services import services

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


class ListScreen(AgentsScreen):
    """A screen listing what the store holds (plans, approvals), read in a thread each time
    it is shown and whenever the store changes while it is on top. :meth:`read` returns the
    message that shows the list; a failed read posts :class:`LoadFailed`."""

    def read(self, store: Store) -> Message:
        """Read the list (in a worker thread)."""
        raise NotImplementedError

    def on_screen_resume(self) -> None:
        self.refresh_data()

    def on_store_changed(self, _: StoreChanged) -> None:
        if self.is_current:  # under another screen: reloaded when shown again (resume)
            self.refresh_data()

    def refresh_data(self) -> None:
        """Reload the list in a thread; the message :meth:`read` returns shows it."""
        self._load()

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def _load(self) -> None:
        try:
            loaded = self.read(services(self).store)
        except Exception as exc:  # the database went away: a notification, not a traceback
            self.post_message(LoadFailed(str(exc)))
            return
        self.post_message(loaded)
