"""The figures block of docs/reliability.md is written from the loops' own figures files
(issue 21, item 5): what a loop records is what the document shows, and nothing else in the
document changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.figures import BEGIN, DOC, END, NONE_YET, main, rewrite
from tests.reliability.harness import FIGURES_ENV, SOAK_ENV, record_figures

AROUND = "# Reliability\n\nBefore the block.\n\n{block}\n\nAfter the block: `|` kept.\n"


@pytest.fixture
def doc(tmp_path: Path) -> Path:
    path = tmp_path / "reliability.md"
    path.write_text(AROUND.format(block=f"{BEGIN}\n| stale | 2026-11-30 | 12 checks |\n{END}"))
    return path


def test_the_block_holds_what_the_loops_recorded_and_nothing_else_changes(
    doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    figures = tmp_path / "figures"
    monkeypatch.setenv(FIGURES_ENV, str(figures))
    monkeypatch.delenv(SOAK_ENV, raising=False)
    record_figures(
        "crash_loop", crash_points=20, things_checked=3531, failpoints_reached={"run": 9}
    )
    monkeypatch.setenv(SOAK_ENV, "25")
    record_figures("fault_loop", faults_injected=46, violations=0)

    assert main(["--doc", str(doc)]) == 0  # the folder from $AGENTS_RELIABILITY_FIGURES

    text = doc.read_text()
    head, rest = text.split(BEGIN)
    body, tail = rest.split(END)
    assert head == "# Reliability\n\nBefore the block.\n\n"
    assert tail == "\n\nAfter the block: `|` kept.\n"
    assert "stale" not in body
    rows = [line for line in body.splitlines() if line.startswith("| ")]
    assert rows[0] == "| loop | run | figures |"
    crash, fault = rows[1:]
    assert crash.startswith("| crash loop | ") and ", bounded |" in crash
    assert crash.endswith("| crash points: 20; failpoints reached: run 9; things checked: 3,531 |")
    assert fault.startswith("| fault loop | ") and ", soak ×25 |" in fault
    assert fault.endswith("| faults injected: 46; **violations: 0** |")

    rewrite(doc, figures)  # again: the same document
    assert doc.read_text() == text


def test_without_figures_the_block_says_how_to_fill_it(doc: Path, tmp_path: Path) -> None:
    rewrite(doc, tmp_path / "none-yet")
    assert doc.read_text() == AROUND.format(block=f"{BEGIN}\n{NONE_YET}\n{END}")


def test_a_document_without_the_markers_is_left_alone(tmp_path: Path) -> None:
    doc = tmp_path / "other.md"
    doc.write_text("# Other\n")
    with pytest.raises(SystemExit, match="no <!-- figures:begin -->"):
        rewrite(doc, tmp_path)
    assert doc.read_text() == "# Other\n"


def test_the_reliability_document_has_one_block() -> None:
    text = DOC.read_text("utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert text.index(BEGIN) < text.index(END)
