"""Command palette: every key-bound action of the current screen and of the app, by name."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider


class AgentsCommands(Provider):
    def _commands(self) -> list[tuple[str, str, Callable[[], object]]]:
        screen = self.screen
        out: list[tuple[str, str, Callable[[], object]]] = []
        seen: set[str] = set()
        for owner, bindings in ((screen, screen.BINDINGS), (self.app, self.app.BINDINGS)):
            for b in bindings:
                if not isinstance(b, Binding) or not b.description or b.action in seen:
                    continue
                if owner is screen and screen.check_action(b.action, ()) is False:
                    continue  # cannot act now (the footer hides it too)
                seen.add(b.action)
                name = b.description
                help_text = f"key: {b.key}" + (f" · {b.id}" if b.id else "")
                out.append((name, help_text, partial(owner.run_action, b.action)))
        return out

    async def discover(self) -> Hits:
        for name, help_text, callback in self._commands():
            yield DiscoveryHit(name, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, callback in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), callback, help=help_text)
