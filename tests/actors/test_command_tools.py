"""local/run-command and local/run-tests: no shell, a minimal environment, bounded runs."""

from __future__ import annotations

import os
import sys

import pytest

from cleveragents_tui.actors.process import _Capture
from cleveragents_tui.domain.enums import Phase
from tests.actors.conftest import API, DB, FILES, GIT, LAYERED, OUTBOX, ToolWorld

WORKDIRS = [GIT, FILES, OUTBOX]


@pytest.mark.parametrize("resource_id", WORKDIRS)
def test_run_command_runs_in_the_workdir(tool_world: ToolWorld, resource_id: str) -> None:
    outcome = tool_world.call(
        "local/run-command",
        {"resource": resource_id, "argv": ["sh", "-c", "pwd; echo made > made.txt"]},
    )
    assert outcome.ok, outcome.output
    workdir = tool_world.workdir(resource_id)
    assert outcome.output == f"exit status 0\n{os.path.realpath(workdir)}"
    assert (workdir / "made.txt").read_text() == "made\n"
    assert outcome.writes == (resource_id,)
    assert tool_world.sandboxes.modified() == {resource_id}


def test_run_command_reports_failure_with_its_output(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-command",
        {"resource": FILES, "argv": ["sh", "-c", "echo out; echo oops >&2; exit 3"]},
    )
    assert not outcome.ok
    assert outcome.output == "exit status 3\nout\noops"
    assert outcome.writes == (FILES,)  # it ran: whatever it did is in the sandbox


def test_a_string_command_is_refused(tool_world: ToolWorld) -> None:
    for tool in ("local/run-command", "local/run-tests"):
        outcome = tool_world.call(tool, {"resource": FILES, "argv": "touch made.txt; ls"})
        assert not outcome.ok
        assert "must be a list of strings, not a string" in outcome.output
        assert "['sh', '-c', '...']" in outcome.output
    assert not (tool_world.workdir(FILES) / "made.txt").exists()
    assert tool_world.sandboxes.modified() == set()


def test_arguments_are_passed_literally(tool_world: ToolWorld) -> None:
    hostile = "; touch pwned && $(touch pwned2) `touch pwned3` | rm -rf . &"
    outcome = tool_world.call(
        "local/run-command", {"resource": FILES, "argv": ["printf", "%s", hostile]}
    )
    assert outcome.ok
    assert outcome.output == f"exit status 0\n{hostile}"
    workdir = tool_world.workdir(FILES)
    assert not any((workdir / name).exists() for name in ("pwned", "pwned2", "pwned3"))
    assert (workdir / "docs" / "guide.md").read_text() == "guide v1\n"


def test_the_environment_is_minimal(tool_world: ToolWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", str(tool_world.tmp / "elsewhere"))
    monkeypatch.setenv("GIT_WORK_TREE", str(tool_world.tmp))
    monkeypatch.setenv("GIT_INDEX_FILE", str(tool_world.tmp / "index"))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-leak")
    outcome = tool_world.call("local/run-command", {"resource": GIT, "argv": ["env"]})
    assert outcome.ok
    lines = outcome.output.splitlines()[1:]
    env = dict(line.split("=", 1) for line in lines)
    assert sorted(env) == [
        "HOME",
        "LANG",
        "PATH",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
    ]
    assert env["PYTHONDONTWRITEBYTECODE"] == env["PYTHONUNBUFFERED"] == "1"
    workdir = tool_world.workdir(GIT)
    assert env["HOME"] == str(workdir)
    assert env["PYTHONPATH"] == f"{workdir / 'src'}:{workdir}"  # the plan's modules first
    assert env["LANG"] == "C.UTF-8"
    assert env["PATH"] == os.environ["PATH"]
    assert "do-not-leak" not in outcome.output


def test_git_in_the_worktree_ignores_the_callers_git_variables(
    tool_world: ToolWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GIT_DIR", str(tool_world.tmp / "elsewhere"))
    tool_world.call("local/write-file", {"resource": GIT, "path": "new.txt", "content": "x\n"})
    outcome = tool_world.call(
        "local/run-command", {"resource": GIT, "argv": ["git", "status", "--porcelain"]}
    )
    assert outcome.ok, outcome.output
    assert "?? new.txt" in outcome.output


def test_stdin_is_closed(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-command", {"resource": FILES, "argv": ["sh", "-c", "cat; echo done"]}
    )
    assert outcome.ok
    assert outcome.output == "exit status 0\ndone"


def test_a_command_that_blocks_times_out(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-command",
        {"resource": FILES, "argv": ["sh", "-c", "echo started; sleep 5"], "timeout_seconds": 0.2},
    )
    assert not outcome.ok
    assert outcome.output == (
        "timed out after 0.2 s; the command and its processes were killed\nstarted"
    )
    tests = tool_world.call(
        "local/run-tests", {"resource": FILES, "argv": ["sleep", "5"], "timeout_seconds": 0.2}
    )
    assert not tests.ok
    assert tests.output.startswith("timed out after 0.2 s")


def test_processes_left_behind_do_not_hold_the_call(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-command",
        {"resource": FILES, "argv": ["sh", "-c", "sleep 30 & echo started"]},
    )
    assert outcome.ok
    assert outcome.output == "exit status 0\nstarted"


@pytest.mark.parametrize("timeout", [0, -1, 600.5, 10_000])
def test_timeouts_out_of_range_are_refused(tool_world: ToolWorld, timeout: float) -> None:
    outcome = tool_world.call(
        "local/run-command", {"resource": FILES, "argv": ["true"], "timeout_seconds": timeout}
    )
    assert not outcome.ok
    assert "timeout_seconds must be above 0 and at most 600" in outcome.output
    assert tool_world.sandboxes.modified() == set()


def test_a_missing_program_is_reported(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-command", {"resource": FILES, "argv": ["no-such-program-anywhere", "-x"]}
    )
    assert not outcome.ok
    assert outcome.output.startswith("local/run-command: cannot run 'no-such-program-anywhere'")
    assert outcome.writes == ()
    assert tool_world.sandboxes.modified() == set()


def test_long_output_is_truncated_keeping_both_ends(tool_world: ToolWorld) -> None:
    script = "echo first; i=0; while [ $i -lt 20000 ]; do echo line-$i; i=$((i+1)); done; echo last"
    outcome = tool_world.call(
        "local/run-command", {"resource": FILES, "argv": ["sh", "-c", script]}
    )
    assert outcome.ok
    assert outcome.output.startswith("exit status 0\nfirst\nline-0\n")
    assert outcome.output.endswith("line-19999\nlast")
    assert "bytes of output omitted ...]" in outcome.output
    assert len(outcome.output.encode()) < 70 * 1024


def test_capture_keeps_head_and_tail() -> None:
    capture = _Capture(head=4, tail=3)
    for chunk in (b"ab", b"cdef", b"gh", b"ij"):
        capture.add(chunk)
    assert capture.total == 10
    assert capture.output() == b"abcd\n[... 3 bytes of output omitted ...]\nhij"
    short = _Capture(head=4, tail=3)
    short.add(b"abcdef")
    assert short.output() == b"abcdef"


@pytest.mark.parametrize("resource_id", [LAYERED, DB, API])
def test_resources_without_a_workdir_are_refused(tool_world: ToolWorld, resource_id: str) -> None:
    for tool in ("local/run-command", "local/run-tests"):
        outcome = tool_world.call(tool, {"resource": resource_id, "argv": ["true"]})
        assert not outcome.ok
        assert f"resource {resource_id}" in outcome.output
        assert "has no working directory" in outcome.output
    assert tool_world.sandboxes.modified() == set()


def test_run_tests_is_a_read_only_validation(tool_world: ToolWorld) -> None:
    passed = tool_world.call("local/run-tests", {"resource": GIT, "argv": ["true"]})
    assert passed.ok
    assert passed.output == "exit status 0"
    failed = tool_world.call(
        "local/run-tests", {"resource": GIT, "argv": ["sh", "-c", "echo 1 failed; exit 1"]}
    )
    assert not failed.ok
    assert failed.output == "exit status 1\n1 failed"
    assert failed.writes == ()
    in_strategize = tool_world.call(
        "local/run-tests", {"resource": GIT, "argv": ["true"]}, Phase.STRATEGIZE
    )
    assert in_strategize.ok
    assert tool_world.sandboxes.modified() == set()


def test_tests_run_on_a_file_rewritten_within_the_second_and_leave_no_bytecode(
    tool_world: ToolWorld,
) -> None:
    # Given a module and its test, the test failing on it
    workdir = tool_world.workdir(FILES)
    (workdir / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    check = "from calc import add; assert add(2, 3) == 5, add(2, 3)"
    argv = [sys.executable, "-c", check]
    assert not tool_world.call("local/run-tests", {"resource": FILES, "argv": argv}).ok
    # When the module is fixed to a file of the same size and the same mtime second
    source = workdir / "calc.py"
    stat = source.stat()
    source.write_text("def add(a, b):\n    return a + b\n")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    # Then the tests run the fixed module, and no bytecode was left in the sandbox
    again = tool_world.call("local/run-tests", {"resource": FILES, "argv": argv})
    assert again.ok, again.output
    assert not list(workdir.rglob("__pycache__"))


def test_run_command_is_refused_in_strategize(tool_world: ToolWorld) -> None:
    outcome = tool_world.call(
        "local/run-command", {"resource": GIT, "argv": ["touch", "x"]}, Phase.STRATEGIZE
    )
    assert not outcome.ok
    assert outcome.output.startswith("Strategize is read-only")
    assert not (tool_world.workdir(GIT) / "x").exists()
