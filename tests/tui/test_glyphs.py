"""Every mark the decision tree and Help's legend show has a glyph in DejaVu Sans Mono, the
monospace font most Linux terminals fall back to: a missing one prints as a box or a
blank, and the mark means nothing (issue 17)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
from fontTools.ttLib import TTFont  # type: ignore[import-untyped]

from cleveragents_tui.tui.screens.help import LEGEND
from cleveragents_tui.views.plan import CHECKPOINT, CORRECTION, SUPERSEDED

# Debian's copy where it is installed; matplotlib (a dependency) ships the same font
FONTS = [
    Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"),
    Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSansMono.ttf",
]


def test_every_tree_mark_is_in_dejavu_sans_mono() -> None:
    font = next(path for path in FONTS if path.exists())
    covered = TTFont(font).getBestCmap()
    marks = {
        *SUPERSEDED,
        *CORRECTION,
        *CHECKPOINT,
        *"".join(mark for mark, _ in LEGEND),
    } - {" "}
    missing = sorted(f"{mark} U+{ord(mark):04X}" for mark in marks if ord(mark) not in covered)
    assert not missing, f"not in {font.name}: {missing}"
