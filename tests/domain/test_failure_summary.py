"""The line a failed call's question quotes: what a person reads before answering it."""

from __future__ import annotations

import pytest

from cleveragents_tui.domain.call_text import FAILURE_CHARS, failure_summary


@pytest.mark.parametrize(
    ("output", "said"),
    [
        ("", "no output"),
        ("exit status 1", "exit status 1"),
        (
            "exit status 1\nF\n=====\nFAIL: test_adds (test_calc.AddTest)\nTraceback …\nFAILED (failures=1)",
            "exit status 1: FAIL: test_adds (test_calc.AddTest)",
        ),
        # a program that exits with a message says it last
        (
            "exit status 1\nchecking the guide\nCONTRIBUTING.md does not name pytest",
            "exit status 1: CONTRIBUTING.md does not name pytest",
        ),
        ("refused: no such resource", "refused: no such resource"),
    ],
)
def test_the_question_quotes_the_line_that_says_why(output: str, said: str) -> None:
    assert failure_summary(output) == said


def test_a_long_line_is_cut_to_the_summary_length() -> None:
    said = failure_summary("exit status 1\n" + "x" * 500)
    assert len(said) == FAILURE_CHARS and said.endswith("…")
