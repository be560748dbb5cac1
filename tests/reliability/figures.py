"""Write the reliability loops' figures into docs/reliability.md, so they cannot go stale.

Each loop writes its figures as JSON (``harness.record_figures``) to
``$AGENTS_RELIABILITY_FIGURES``; this rewrites the block between the markers of
docs/reliability.md from those files, one row per loop, each with the run it came from.
``nox -s soak`` runs it after the loops; by hand: ``python -m tests.reliability.figures
[--dir FOLDER] [--doc FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.reliability.harness import figures_dir

DOC = Path(__file__).resolve().parents[2] / "docs" / "reliability.md"
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
NONE_YET = "No figures yet: run `nox -s soak` (or `pytest tests/reliability`, then `python -m tests.reliability.figures`) to fill this table."
# Written by record_figures about the run, not counted by the loop: shown in their own column.
RUN_KEYS = ("test", "recorded_at", "soak_iterations")
ALARMS = ("violations", "divergences", "stuck", "half_applied")


def _value(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_value(v)}" for k, v in value.items())
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _run(figures: dict[str, Any], written: datetime) -> str:
    """When (the file's time for figures written before record_figures said), and whether
    it was the bounded run or a soak of how many iterations."""
    when = str(figures.get("recorded_at") or written.strftime("%Y-%m-%d %H:%M UTC"))
    if "soak_iterations" not in figures:
        return when
    soak = figures["soak_iterations"]
    return f"{when}, soak ×{soak}" if soak else f"{when}, bounded"


def block(folder: Path) -> str:
    """The generated block (markers included) from every ``*.json`` figures file in
    ``folder``, one row per loop sorted by name; a line saying how to fill it if none."""
    rows = []
    for path in sorted(folder.glob("*.json")):
        figures = json.loads(path.read_text("utf-8"))
        if not isinstance(figures, dict):
            continue
        written = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        cells = [
            f"**{k.replace('_', ' ')}: {_value(v)}**"
            if k in ALARMS
            else f"{k.replace('_', ' ')}: {_value(v)}"
            for k, v in sorted(figures.items())
            if k not in RUN_KEYS
        ]
        name = str(figures.get("test", path.stem)).replace("_", " ")
        rows.append(f"| {name} | {_run(figures, written)} | {'; '.join(cells)} |")
    if not rows:
        return f"{BEGIN}\n{NONE_YET}\n{END}"
    table = ["| loop | run | figures |", "|---|---|---|", *rows]
    return (
        f"{BEGIN}\nGenerated from `{folder.name}/*.json` by `tests/reliability/figures.py`.\n\n"
        + ("\n".join(table) + f"\n{END}")
    )


def rewrite(doc: Path, folder: Path) -> None:
    """Put a fresh block between the markers of ``doc`` (refused if they are missing: the
    block's place is chosen by whoever writes the document)."""
    text = doc.read_text("utf-8")
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc} has no {BEGIN} … {END} markers: add them where the table goes")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    doc.write_text(head + block(folder) + tail, "utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="figures folder (default: $AGENTS_RELIABILITY_FIGURES)",
    )
    parser.add_argument("--doc", type=Path, default=DOC, help="document to rewrite")
    args = parser.parse_args(argv)
    folder = args.dir or figures_dir()
    rewrite(args.doc, folder)
    print(f"wrote the figures of {folder} to {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
