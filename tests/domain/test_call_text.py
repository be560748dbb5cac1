"""A call's arguments as a person reads them in a guard's question and in `plan explain`."""

from __future__ import annotations

from cleveragents_tui.domain.call_text import LINE_CHARS, VALUE_CHARS, arguments_line


def test_the_resource_comes_first_and_long_values_last_summed_up() -> None:
    line = arguments_line(
        {"content": "import os\n\nprint(os.sep)\n", "path": "a.py", "resource": "repo"}
    )
    assert line == "resource: repo; path: a.py; content: import os (3 lines, 25 characters)"


def test_an_argv_reads_as_a_shell_would_and_other_values_as_json() -> None:
    line = arguments_line({"argv": ["rm", "-rf", "my dir"], "timeout_seconds": 5, "x": None})
    assert line == "argv: rm -rf 'my dir'; timeout_seconds: 5; x: null"


def test_controls_are_escaped_and_values_and_the_line_are_cut() -> None:
    sql = "SELECT " + "x, " * 100
    line = arguments_line({"path": "\x1b]0;title\x07.txt", "sql": sql})
    assert "\x1b" not in line
    assert (
        line
        == f"path: \\x1b]0;title\\x07.txt; sql: {sql[: VALUE_CHARS // 2 - 1]}… (307 characters)"
    )
    long = arguments_line({f"k{n}": "v" * 70 for n in range(10)})
    assert len(long) == LINE_CHARS and long.endswith("…")
