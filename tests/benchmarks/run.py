"""Run every ``bench_*.py`` module here and write the figures to docs/benchmarks.md.

Each module has ``run(quick: bool) -> list[Measurement]``. Usage:
``python -m tests.benchmarks.run [--quick] [NAME ...]`` (``nox -s bench`` runs all).
"""

from __future__ import annotations

import argparse
import importlib
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

from tests.benchmarks.harness import Measurement

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "docs" / "benchmarks.md"
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"


def _table(results: list[Measurement]) -> str:
    lines = [
        "| group | measurement | seconds | baseline | baseline s | ratio | target | met |",
        "|---|---|---:|---|---:|---:|---|---|",
    ]
    for m in results:
        met = "" if m.met is None else ("yes" if m.met else "**no**")
        ours, theirs = f"{m.seconds:.4f}", f"{m.baseline_seconds:.4f}"
        if m.unit != "s":
            ours, theirs = f"{m.seconds:.1f} {m.unit}", f"{m.baseline_seconds:.1f} {m.unit}"
        if m.median is not None and m.baseline_median is not None:  # min (median)
            ours, theirs = f"{ours} ({m.median:.4f})", f"{theirs} ({m.baseline_median:.4f})"
        lines.append(
            f"| {m.group} | {m.name} | {ours} | {m.baseline} | {theirs} "
            f"| {m.ratio:.2f}× | {m.target} | {met} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller inputs, fewer repeats")
    parser.add_argument("names", nargs="*", help="run only these bench modules (e.g. plan_tree)")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="NAME",
        help="leave out this module (repeatable)",
    )
    args = parser.parse_args()
    modules = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if args.names:
        modules = [m for m in modules if m.removeprefix("bench_") in args.names or m in args.names]
    modules = [m for m in modules if m.removeprefix("bench_") not in args.skip]
    results: list[Measurement] = []
    for name in modules:
        print(f"== {name}", flush=True)
        module = importlib.import_module(f"tests.benchmarks.{name}")
        for m in module.run(quick=args.quick):
            print(
                f"  {m.name}: {m.seconds:.6f}{m.unit} vs {m.baseline} {m.baseline_seconds:.6f}{m.unit} "
                f"= {m.ratio:.2f}x "
                f"(target {m.target}; met: {m.met}; medians {m.median} vs {m.baseline_median})",
                flush=True,
            )
            results.append(m)
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    block = (
        f"{BEGIN}\nLast run: {stamp} on {platform.machine()}, Python {platform.python_version()}"
        f"{' (quick)' if args.quick else ''}, modules: {', '.join(modules)}.\n\n{_table(results)}\n{END}"
    )
    text = DOC.read_text("utf-8") if DOC.exists() else "# Benchmarks\n\n"
    if BEGIN in text and END in text and not args.names:
        head, _, rest = text.partition(BEGIN)
        _, _, tail = rest.partition(END)
        text = head + block + tail
    elif not args.names:
        text = text.rstrip() + "\n\n" + block + "\n"
    else:
        print("(partial run: docs/benchmarks.md left unchanged)")
    DOC.write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
