"""``agents`` cold start: a fresh Python process for ``agents --help`` and ``agents plan list``.

Each figure is the best of N runs of a new interpreter (subprocess, wall clock), against
``python -c "import click"`` measured in the same run: the least any click CLI costs. The
goal for ``--help`` is ≤ 1.5× that floor (docs/benchmarks.md); ``plan list`` opens the store
(SQLAlchemy, the schema check) and is reported for context.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from tests.benchmarks.harness import Measurement, best_of

CLICK = "import click"


def _cold(args: list[str]) -> Callable[[], None]:
    """One fresh interpreter running ``args`` to its end."""

    def once() -> None:
        subprocess.run(args, check=True, capture_output=True, timeout=120)

    return once


def run(quick: bool) -> list[Measurement]:
    repeat = 3 if quick else 9
    python = sys.executable
    agents = [python, "-m", "cleveragents_tui"]
    with tempfile.TemporaryDirectory() as tmp:
        database = str(Path(tmp) / "agents.db")
        subprocess.run(
            [*agents, "--db", database, "db", "upgrade"], check=True, capture_output=True
        )
        floor = best_of(_cold([python, "-c", CLICK]), repeat)
        helped = best_of(_cold([*agents, "--help"]), repeat)
        version = best_of(_cold([*agents, "--version"]), repeat)
        listed = best_of(_cold([*agents, "--db", database, "plan", "list"]), repeat)
    baseline = 'python -c "import click"'
    return [
        Measurement(
            "cli",
            "agents --help, cold start",
            helped,
            baseline,
            floor,
            "≤ 1.5×",
            helped <= 1.5 * floor,
        ),
        Measurement(
            "cli",
            "agents --version, cold start",
            version,
            baseline,
            floor,
            "≤ 1.5×",
            version <= 1.5 * floor,
        ),
        Measurement(
            "cli",
            "agents plan list (empty store), cold start",
            listed,
            baseline,
            floor,
            "(context)",
            None,
        ),
    ]
