"""``agents automation-profile add/list/show/remove``: output, JSON and exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result

from cleveragents_tui.domain.profile import BUILTIN_PROFILE_NAMES, AutomationFlag
from cleveragents_tui.resources import data_path
from tests.cli.conftest import Run

EXAMPLE = str(data_path("profiles", "examples", "nuanced-auto.yaml"))


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.output


def one_line_error(result: Result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.output
    assert result.stdout == ""
    return lines[0]


def custom_names(run: Run) -> list[str]:
    document = json.loads(ok(run("automation-profile", "list", "--format=json")))
    return [p["name"] for p in document["profiles"] if p["kind"] == "custom"]


def test_list_text(run: Run) -> None:
    lines = ok(run("automation-profile", "list")).splitlines()
    assert lines[0].split() == ["NAME", "KIND", "SUMMARY"]
    assert [line.split()[0] for line in lines[1:]] == list(BUILTIN_PROFILE_NAMES)
    manual = lines[1]
    assert "built-in" in manual
    assert "Strategize manual, Execute manual, Apply manual; 0 automatic" in manual
    cautious = next(line for line in lines if line.startswith("cautious"))
    assert "Strategize ≥0.7, Execute ≥0.7, Apply manual; 1 automatic, 9 by confidence" in cautious
    ci = next(line for line in lines if line.startswith("ci "))
    assert "Apply auto; 11 automatic" in ci


def test_list_json(run: Run) -> None:
    document = json.loads(ok(run("automation-profile", "list", "--format=json")))
    assert document["format"] == "cleveragents.automation-profile-list/1"
    assert [p["name"] for p in document["profiles"]] == list(BUILTIN_PROFILE_NAMES)
    cautious = document["profiles"][3]
    assert cautious["kind"] == "built-in"
    assert list(cautious["thresholds"]) == [f.value for f in AutomationFlag]
    assert cautious["thresholds"]["access_network"] == 0.9
    assert cautious["safety"]["max_retries_per_step"] == 3
    assert cautious["guards"] is None


def test_global_format_option_applies(run: Run) -> None:
    document = json.loads(ok(run("--format", "json", "automation-profile", "list")))
    assert document["format"] == "cleveragents.automation-profile-list/1"


def test_show_text_names_what_each_threshold_gates(run: Run) -> None:
    output = ok(run("automation-profile", "show", "cautious"))
    assert output.startswith("cautious (built-in)\n")
    lines = output.splitlines()
    select = next(line for line in lines if line.strip().startswith("select_tool"))
    assert select.split()[:3] == ["select_tool", "1.0", "manual"]
    assert select.endswith("Execute → Apply")
    restore = next(line for line in lines if line.strip().startswith("approve_plan"))
    assert "confidence >= 0.6" in restore
    assert restore.endswith("restore from checkpoint on failure")
    retry = next(line for line in lines if line.strip().startswith("modify_config"))
    assert "automatic" in retry
    assert retry.endswith("retry transient failures")
    assert "Safety" in lines
    assert any(line.split() == ["require_sandbox", "true"] for line in lines)
    assert any(line.split() == ["max_cost_per_plan", "no", "limit"] for line in lines)
    assert any(line.split() == ["max_retries_per_step", "3"] for line in lines)
    assert "Guards" in lines
    assert "  none (every tool call is allowed by the guards)" in lines


def test_show_json(run: Run) -> None:
    document = json.loads(ok(run("automation-profile", "show", "full-auto", "--format=json")))
    assert document["format"] == "cleveragents.automation-profile/1"
    assert "result" not in document
    profile = document["profile"]
    assert profile["name"] == "full-auto"
    assert profile["kind"] == "built-in"
    assert set(profile["thresholds"].values()) == {0.0}
    assert profile["safety"]["allow_unsafe_tools"] is True
    assert profile["safety"]["require_sandbox"] is False


def test_add_show_remove(run: Run) -> None:
    output = ok(run("automation-profile", "add", "--config", EXAMPLE))
    assert output.startswith(
        "added local/nuanced-auto: Strategize auto, Execute ≥0.5, Apply manual"
    )
    assert custom_names(run) == ["local/nuanced-auto"]
    shown = ok(run("automation-profile", "show", "local/nuanced-auto"))
    assert shown.startswith("local/nuanced-auto (custom)\n")
    assert "Nuanced automation with graduated confidence thresholds" in shown
    listed = ok(run("automation-profile", "list")).splitlines()
    assert listed[-1].split()[:2] == ["local/nuanced-auto", "custom"]
    assert ok(run("automation-profile", "remove", "local/nuanced-auto")) == (
        "removed local/nuanced-auto\n"
    )
    assert custom_names(run) == []


def test_add_and_remove_json(run: Run) -> None:
    added = json.loads(ok(run("automation-profile", "add", "--config", EXAMPLE, "--format=json")))
    assert added["format"] == "cleveragents.automation-profile/1"
    assert added["result"] == "added"
    assert added["profile"]["thresholds"]["execute_command"] == 0.7
    again = run("automation-profile", "add", "--config", EXAMPLE, "--replace", "--format=json")
    assert json.loads(ok(again))["result"] == "replaced"
    removed = run("automation-profile", "remove", "local/nuanced-auto", "--format=json")
    document = json.loads(ok(removed))
    assert document["result"] == "removed"
    assert document["profile"]["name"] == "local/nuanced-auto"


def test_add_twice_needs_replace(run: Run, tmp_path: Path) -> None:
    ok(run("automation-profile", "add", "--config", EXAMPLE))
    one_line_error(
        run("automation-profile", "add", "--config", EXAMPLE),
        "automation profile local/nuanced-auto already exists",
        "--replace",
    )
    changed = tmp_path / "changed.yaml"
    changed.write_text(
        Path(EXAMPLE).read_text(encoding="utf-8").replace("edit_code: 0.3", "edit_code: 0.4"),
        encoding="utf-8",
    )
    assert ok(run("automation-profile", "add", "--config", str(changed), "--replace")).startswith(
        "replaced local/nuanced-auto"
    )
    document = json.loads(
        ok(run("automation-profile", "show", "local/nuanced-auto", "--format=json"))
    )
    assert document["profile"]["thresholds"]["edit_code"] == 0.4


def test_show_guards(run: Run, tmp_path: Path) -> None:
    text = Path(EXAMPLE).read_text(encoding="utf-8") + (
        "guards:\n  max_tool_calls_per_step: 5\n  tool_denylist: [deploy, rm]\n"
        "  require_approval_for_apply: true\n"
    )
    path = tmp_path / "guarded.yaml"
    path.write_text(text, encoding="utf-8")
    ok(run("automation-profile", "add", "--config", str(path)))
    lines = ok(run("automation-profile", "show", "local/nuanced-auto")).splitlines()
    assert any(line.split() == ["max_tool_calls_per_step", "5"] for line in lines)
    assert any(line.split() == ["tool_denylist", "deploy,", "rm"] for line in lines)
    assert any(line.split() == ["tool_allowlist", "all", "tools"] for line in lines)
    assert any(line.split() == ["require_approval_for_apply", "true"] for line in lines)


def test_show_escapes_terminal_escapes_in_descriptions(run: Run, tmp_path: Path) -> None:
    text = (
        Path(EXAMPLE)
        .read_text(encoding="utf-8")
        .replace(
            'description: "Nuanced automation with graduated confidence thresholds"',
            'description: "evil \\e[31mred\\e[0m \\a"',
        )
    )
    path = tmp_path / "evil.yaml"
    path.write_text(text, encoding="utf-8")
    ok(run("automation-profile", "add", "--config", str(path)))
    output = ok(run("automation-profile", "show", "local/nuanced-auto"))
    assert "\x1b" not in output
    assert "\a" not in output
    assert "evil \\x1b[31mred\\x1b[0m \\x07" in output  # shown, not obeyed


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (("show", "nope"), ("no automation profile named 'nope'", "manual, review")),
        (("remove", "local/nope"), ("no automation profile named 'local/nope'",)),
        (("remove", "manual"), ("manual is a built-in automation profile and cannot be removed",)),
        (("add", "--config", "/nonexistent/p.yaml"), ("/nonexistent/p.yaml: no such file",)),
    ],
)
def test_errors_are_one_line_exit_2(
    run: Run, args: tuple[str, ...], fragments: tuple[str, ...]
) -> None:
    one_line_error(run("automation-profile", *args), *fragments)


BAD = {
    "threshold": (
        "edit_code: 0.3",
        "edit_code: 1.5",
        "edit_code: must be a number between 0.0 and 1.0 (got 1.5)",
    ),
    "unknown key": (
        "edit_code: 0.3",
        "edit_cod: 0.3",
        "edit_cod: unknown key: did you mean edit_code?",
    ),
    "shadow": (
        "name: local/nuanced-auto",
        "name: cautious",
        "built-in profiles cannot be shadowed",
    ),
    "namespace": ("name: local/nuanced-auto", "name: nuanced", "name: 'nuanced' has no namespace"),
    "unsafe tag": (
        "name: local/nuanced-auto",
        "name: !!python/object/apply:os.system ['true']",
        "line 3: the YAML tag !!python/object/apply:os.system is not allowed",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_files_refused_and_nothing_registered(run: Run, tmp_path: Path, case: str) -> None:
    old, new, fragment = BAD[case]
    original = Path(EXAMPLE).read_text(encoding="utf-8")
    assert old in original
    path = tmp_path / "bad.yaml"
    path.write_text(original.replace(old, new), encoding="utf-8")
    one_line_error(run("automation-profile", "add", "--config", str(path)), f"{path}: ", fragment)
    assert custom_names(run) == []


def test_empty_and_non_mapping_files(run: Run, tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    one_line_error(run("automation-profile", "add", "--config", str(empty)), "the file is empty")
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n", encoding="utf-8")
    one_line_error(
        run("automation-profile", "add", "--config", str(listed)), "must be a YAML mapping"
    )
    assert custom_names(run) == []


def test_help_lists_the_commands(run: Run) -> None:
    output = ok(run("automation-profile", "--help"))
    for command in ("add", "list", "show", "remove"):
        assert command in output


def _profile(run: Run, name: str) -> dict[str, object]:
    document = json.loads(ok(run("automation-profile", "show", name, "--format=json")))
    profile: dict[str, object] = document["profile"]
    return profile


@pytest.mark.parametrize("builtin", BUILTIN_PROFILE_NAMES)
def test_an_exported_builtin_is_added_back_as_the_same_profile(
    run: Run, tmp_path: Path, builtin: str
) -> None:
    """`export` writes what `add --config` takes: a custom profile starts from a built-in
    rather than from all eleven thresholds typed by hand."""
    path = tmp_path / "mine.yaml"
    said = ok(run("automation-profile", "export", builtin, "-o", str(path)))
    assert (
        said.strip() == f"wrote {path}: edit it, then agents automation-profile add --config {path}"
    )

    ok(run("automation-profile", "add", "--config", str(path)))

    mine, theirs = _profile(run, f"local/{builtin}"), _profile(run, builtin)
    assert {k: v for k, v in mine.items() if k not in ("name", "kind")} == {
        k: v for k, v in theirs.items() if k not in ("name", "kind")
    }


def test_an_exported_profile_with_its_guards_uncommented_guards(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "guarded.yaml"
    ok(run("automation-profile", "export", "ci", "--name", "team/guarded", "-o", str(path)))
    text = path.read_text(encoding="utf-8")
    assert "# guards:" in text and "#   tool_denylist: [local/run-command]" in text
    path.write_text(
        text.replace("# guards:", "guards:").replace(
            "#   tool_denylist: [local/run-command]", "  tool_denylist: [local/run-command]"
        ),
        encoding="utf-8",
    )
    added = ok(run("automation-profile", "add", "--config", str(path)))
    # the line a person reads says the guard is on, in `add` and in `list`
    assert added.endswith("11 automatic, 0 by confidence, 0 manual; guards: tool_denylist\n")
    listed = ok(run("automation-profile", "list"))
    assert "0 manual; guards: tool_denylist\n" in listed
    assert _profile(run, "team/guarded")["guards"] == {
        "max_tool_calls_per_step": None,
        "max_total_cost": None,
        "tool_allowlist": None,
        "tool_denylist": ["local/run-command"],
        "require_approval_for_writes": False,
        "require_approval_for_apply": False,
    }
    printed = ok(run("automation-profile", "export", "team/guarded"))  # to standard output
    assert printed.startswith("# from automation profile team/guarded: edit it, then\n")
    assert "guards:\n  tool_denylist:\n  - local/run-command\n" in printed
    assert "# guards:" not in printed


def test_export_refusals_are_one_line_and_write_nothing(run: Run, tmp_path: Path) -> None:
    kept = tmp_path / "kept.yaml"
    kept.write_text("mine\n", encoding="utf-8")
    one_line_error(run("automation-profile", "export", "ci", "-o", str(kept)), "already exists")
    one_line_error(run("automation-profile", "export", "nope"), "no automation profile named")
    one_line_error(run("automation-profile", "export", "ci", "--name", "cautious"), "built-in")
    assert kept.read_text(encoding="utf-8") == "mine\n"
    assert custom_names(run) == []


def test_add_takes_the_file_as_an_argument_too(run: Run, tmp_path: Path) -> None:
    """`add FILE`, as `add --config FILE`: a person who typed the first was told only
    `Missing option '--config'`; giving none, or two, is one line naming the way."""
    path = tmp_path / "mine.yaml"
    ok(run("automation-profile", "export", "auto", "-o", str(path)))
    one_line_error(run("automation-profile", "add"), "no profile file given", "--config FILE")
    one_line_error(
        run("automation-profile", "add", str(path), "--config", str(path)), "two profile files"
    )
    assert custom_names(run) == []

    ok(run("automation-profile", "add", str(path)))

    assert custom_names(run) == ["local/auto"]
