"""Identifiers that reach git or SQL are matched whole: no trailing newline slips through."""

from __future__ import annotations

import pytest

from cleveragents_tui.sandbox.safety import (
    UnsafeInputError,
    check_ref_name,
    check_savepoint_name,
    check_sha,
    safe_relative_path,
)


@pytest.mark.parametrize(
    ("check", "value"),
    [
        (check_sha, "a" * 40 + "\n"),
        (check_sha, "a" * 39),
        (check_ref_name, "refs/cleveragents/abc\n"),
        (check_ref_name, "--upload-pack=x"),
        (check_savepoint_name, "sp_0123456789abcdef\n"),
        (check_savepoint_name, "x; DROP TABLE t"),
        (safe_relative_path, "../etc/passwd"),
        (safe_relative_path, "/etc/passwd"),
        (safe_relative_path, ".git/config"),
    ],
)
def test_refused(check, value: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnsafeInputError):
        check(value)


def test_accepted() -> None:
    assert check_sha("a" * 40) == "a" * 40
    assert check_ref_name("refs/cleveragents/p1/base") == "refs/cleveragents/p1/base"
    assert check_savepoint_name("sp_0123456789abcdef") == "sp_0123456789abcdef"
