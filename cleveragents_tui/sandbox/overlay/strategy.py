"""Makes and reopens overlay sandboxes (the registry's ``overlay`` strategy)."""

from __future__ import annotations

from cleveragents_tui.domain.enums import SandboxStrategyName
from cleveragents_tui.sandbox.directory_sandbox import DirectoryStrategy
from cleveragents_tui.sandbox.overlay.sandbox import OverlaySandbox

_STRATEGY = SandboxStrategyName.OVERLAY


class OverlayStrategy(DirectoryStrategy[OverlaySandbox]):
    """Makes :class:`OverlaySandbox` es (``durable``: flush each checkpoint to the disk)."""

    name = _STRATEGY
    sandbox_type = OverlaySandbox
