"""``python -m cleveragents_tui`` is the ``agents`` command."""

from cleveragents_tui.cli import main

main()
