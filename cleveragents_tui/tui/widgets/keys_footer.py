"""Textual's footer, rebuilt only when the keys it shows change: it rebuilds all its key
widgets at every bindings signal (a focus, a cursor's first move, a screen resumed), and
opening a plan sent four, each rebuild ~30 ms of the event loop, before the first
decision's details could be drawn."""

from __future__ import annotations

from textual.widgets import Footer

Shown = tuple[tuple[str, str, str, bool, str], ...]  # key, description, action, enabled, tip


class KeysFooter(Footer):
    _shown: Shown | None = None  # the keys of the last rebuild

    def _keys(self) -> Shown:
        return tuple(
            (binding.key, binding.description, binding.action, enabled, tooltip)
            for _, binding, enabled, tooltip in self.screen.active_bindings.values()
            if binding.show
        )

    async def recompose(self) -> None:
        if not self.is_attached:
            return
        keys = self._keys()
        if keys != self._shown:
            self._shown = keys
            await super().recompose()
