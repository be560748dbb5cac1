"""The two renderers of a view print the same characters, and neither lets a control
character through: the CLI and the app cannot drift, and both stay safe."""

from __future__ import annotations

from cleveragents_tui.views.rich_text import to_rich
from cleveragents_tui.views.sections import Row, Section, to_plain_text

HOSTILE = "\x1b]52;c;cHduZWQ=\x07\x9b31m\u202e"

VIEW = (
    Section(None, (Row("", "decision 01J · strategy_choice", "heading"), Row("plan", "01P"))),
    Section(
        "fields",
        (
            Row("question", "why?" + HOSTILE),
            Row("rationale", "first line\nsecond line", "dim"),
            Row("", "⚠ local/notify", "bad"),
        ),
    ),
)


def test_plain_and_rich_are_the_same_text() -> None:
    plain = to_plain_text(VIEW)
    assert to_rich(VIEW).plain == plain
    assert plain.splitlines() == [
        "decision 01J · strategy_choice",
        "plan  01P",
        "",
        "fields",
        "  question   why?\\x1b]52;c;cHduZWQ=\\x07\\x9b31m\\u202e",
        "  rationale  first line",
        "             second line",  # a later line stays in the value's column
        "  ⚠ local/notify",
    ]


def test_emphasis_is_a_style_in_the_app_only() -> None:
    text = to_rich(VIEW)
    styles = {text.plain[s.start : s.end]: str(s.style) for s in text.spans}
    assert styles["⚠ local/notify"] == "bold red"
    assert styles["decision 01J · strategy_choice"] == "bold underline"
    assert not [c for c in text.plain if ord(c) < 32 and c != "\n"]
