"""Reading the YAML people write (action files, automation profiles), outside the layers."""

from __future__ import annotations

from typing import Any

import yaml


class NoAliasLoader(yaml.SafeLoader):
    """``yaml.safe_load``, refusing aliases: an alias repeats a value without repeating its
    text, so a few hundred bytes can stand for gigabytes once the file is stored with a plan
    (a "billion laughs"). Neither actions nor profiles have any use for them."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event: Any = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "anchors and aliases (*name) are not supported", event.start_mark
            )
        return super().compose_node(parent, index)
