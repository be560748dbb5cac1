"""The failpoint switch (cleveragents_tui/failpoints.py): names, details, ``#N``, ``*``."""

from __future__ import annotations

import pytest

from cleveragents_tui import failpoints
from cleveragents_tui.failpoints import ENV_VAR, InjectedFault


def fires(name: str, detail: str | None = None) -> bool:
    try:
        failpoints.hit(name, detail)
    except InjectedFault:
        return True
    return False


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    failpoints.reset()


def test_unset_nothing_fires_but_every_hit_is_counted() -> None:
    assert not fires("git.call", "status") and not fires("git.call") and not fires("fs.write")
    assert failpoints.hits() == {"git.call": 2, "fs.write": 1}


def test_a_name_fires_every_time_and_a_detail_narrows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "rollback.resource@local/db, record.decision")
    assert fires("rollback.resource", "local/db") and fires("rollback.resource", "local/db")
    assert not fires("rollback.resource", "local/repo")
    assert fires("record.decision", "execute") and fires("record.decision")
    assert not fires("record.recorded")


def test_the_nth_hit_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "git.call#3=raise")
    assert [fires("git.call", "status") for _ in range(5)] == [False, False, True, False, False]
    assert not fires("fs.write")  # other points do not count towards it


def test_star_counts_every_failpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "*#4")
    names = ["store.commit", "git.call", "fs.write", "saver.put", "store.commit"]
    assert [fires(n) for n in names] == [False, False, False, True, False]


def test_counts_restart_with_a_new_value_and_with_reset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "fs.write#2")
    assert [fires("fs.write") for _ in range(2)] == [False, True]
    monkeypatch.setenv(ENV_VAR, "fs.write#2,saver.put#9")
    assert [fires("fs.write") for _ in range(2)] == [False, True]
    monkeypatch.setenv(ENV_VAR, "fs.write#2")
    failpoints.reset()
    assert [fires("fs.write") for _ in range(2)] == [False, True]


@pytest.mark.parametrize("spec", ["git.call=explode", "git.call#x", "git.call#2=maybe"])
def test_a_spec_that_cannot_be_read_is_refused(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv(ENV_VAR, spec)
    with pytest.raises(ValueError, match="name\\[@detail\\]\\[#N\\]"):
        failpoints.hit("git.call")


def test_the_variable_is_read_as_os_environ_holds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """hit() reads the dict under os.environ (cheaper than os.environ.get): every change
    made through os.environ is seen at the next hit, as os.environ.get would see it."""
    for value in ("store.commit", "checkpoint.after_resource@local/fïles", ""):
        monkeypatch.setenv(ENV_VAR, value)
        assert failpoints._read_environ() == value
    monkeypatch.delenv(ENV_VAR)
    assert failpoints._read_environ() is None
    assert not fires("store.commit")
