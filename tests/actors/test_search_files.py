"""`local/search-files`: where a fixed string occurs in a resource's files, as an agent finds
its way in a project it has not seen. What it reports is checked against a direct walk of the
same files (the workdir on disk, or the overlay's own merged view): every ``path:LINE`` and
nothing else, binary and large files skipped and counted, symlinks never followed."""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest

from cleveragents_tui.actors import search_tool
from cleveragents_tui.actors.search_tool import MAX_SIZE, SHOWN, SNIFF
from cleveragents_tui.actors.tools import default_registry
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.sandbox.overlay import OverlaySandbox
from cleveragents_tui.sandbox.overlay.files import EntryKind
from tests.actors.conftest import DB, FILES, GIT, LAYERED, OUTBOX, ToolWorld

WITH_FILES = [GIT, FILES, LAYERED, OUTBOX]
MATCH = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<text>.*)$")

SEED = {
    "src/greet.py": "def greet():\n    return 'needle'\n\n# NEEDLE in caps\nprint(greet())\n",
    "src/deep/more.py": "x = 1\nneedle = x  # needle twice on one line\n",
    "src/notes.txt": "first\r\nsecond needle\r\nthird Needle\r\n",
    "README.md": "# project\nno match here\nlast line needle",  # no final line break
    "docs/needle.md": "the name matches, the text does not\n",
}


def _seed(world: ToolWorld, resource_id: str, files: dict[str, str] = SEED) -> None:
    for path, content in files.items():
        written = world.call(
            "local/write-file", {"resource": resource_id, "path": path, "content": content}
        )
        assert written.ok, written.output


def _files(world: ToolWorld, resource_id: str) -> dict[str, bytes]:
    """Every regular file the sandbox holds, read directly (git's metadata and whatever a
    symlink leads to left out)."""
    sandbox = world.sandboxes.get(resource_id)
    if isinstance(sandbox, OverlaySandbox):
        return {
            e.path: sandbox.read_bytes(e.path) for e in sandbox.walk() if e.kind is EntryKind.FILE
        }
    top = world.workdir(resource_id)
    found: dict[str, bytes] = {}
    for folder, folders, names in os.walk(top):  # os.walk does not enter symlinked folders
        folders[:] = [f for f in folders if f != ".git"]
        for name in names:
            full = Path(folder) / name
            if name != ".git" and not full.is_symlink() and full.is_file():
                found[full.relative_to(top).as_posix()] = full.read_bytes()
    return found


def _searchable(data: bytes) -> bool:
    return len(data) <= MAX_SIZE and b"\x00" not in data[:SNIFF]


def _expected(
    files: dict[str, bytes],
    text: str,
    *,
    ignore_case: bool = False,
    glob: str | None = None,
    under: str | None = None,
) -> list[tuple[str, int]]:
    """Every (path, line number) holding ``text``, in path order: grep -rnF by hand."""
    found = []
    for path in sorted(files):
        if under is not None and not path.startswith(under + "/"):
            continue
        if glob is not None and not (
            fnmatchcase(path, glob) or fnmatchcase(path.split("/")[-1], glob)
        ):
            continue
        if not _searchable(files[path]):
            continue
        lines = files[path].decode("utf-8", errors="replace").split("\n")
        for number, line in enumerate(lines, start=1):
            if (text.lower() in line.lower()) if ignore_case else (text in line):
                found.append((path, number))
    return found


def _reported(output: str) -> list[tuple[str, int]]:
    return [
        (m["path"], int(m["line"])) for line in output.splitlines()[1:] if (m := MATCH.match(line))
    ]


def _search(world: ToolWorld, resource_id: str, text: str, **options: Any) -> str:
    outcome = world.call("local/search-files", {"resource": resource_id, "text": text, **options})
    assert outcome.ok, outcome.output
    assert outcome.writes == ()
    return outcome.output


@pytest.mark.parametrize("resource_id", WITH_FILES)
def test_every_matching_line_is_reported_as_a_direct_walk_finds_it(
    tool_world: ToolWorld, resource_id: str
) -> None:
    _seed(tool_world, resource_id)
    files = _files(tool_world, resource_id)
    expected = _expected(files, "needle")

    output = _search(tool_world, resource_id, "needle")

    assert _reported(output) == expected  # every line, in the listing's order, nothing else
    matched = len({path for path, _ in expected})
    assert output.splitlines()[0] == (
        f"{len(expected)} matches in {matched} files "
        f"({sum(map(_searchable, files.values()))} files searched)"
    )
    assert "src/greet.py:2: return 'needle'" in output.splitlines()  # stripped
    assert "src/notes.txt:2: second needle" in output.splitlines()  # \r\n: no \r shown
    assert not any(p == "docs/needle.md" for p, _ in _reported(output))  # names aren't searched
    assert tool_world.sandboxes.modified() == {resource_id}  # the seeding's writes, no more


@pytest.mark.parametrize("resource_id", [FILES, LAYERED])
@pytest.mark.parametrize(
    "options",
    [
        {"ignore_case": True},
        {"ignore_case": False},
        {"glob": "*.py"},
        {"glob": "src/*.py"},
        {"glob": "*.txt", "ignore_case": True},
        {"glob": "README.md"},
        {"path": "src"},
        {"path": "src/deep", "glob": "*.py"},
        {"path": "."},
    ],
)
def test_case_glob_and_folder_narrow_the_search_as_the_walk_does(
    tool_world: ToolWorld, resource_id: str, options: dict[str, Any]
) -> None:
    _seed(tool_world, resource_id)
    files = _files(tool_world, resource_id)
    under = options.get("path")
    expected = _expected(
        files,
        "needle",
        ignore_case=bool(options.get("ignore_case")),
        glob=options.get("glob"),
        under=None if under == "." else under,
    )
    assert expected  # each case finds something

    output = _search(tool_world, resource_id, "needle", **options)

    assert _reported(output) == expected


@pytest.mark.parametrize("resource_id", [FILES, LAYERED])
def test_case_and_glob_examples(tool_world: ToolWorld, resource_id: str) -> None:
    _seed(tool_world, resource_id)

    folded = _reported(_search(tool_world, resource_id, "NeEdLe", ignore_case=True))
    assert ("src/greet.py", 4) in folded and ("src/notes.txt", 3) in folded
    exact = _reported(_search(tool_world, resource_id, "NEEDLE"))
    assert exact == [("src/greet.py", 4)]
    python = {p for p, _ in _reported(_search(tool_world, resource_id, "needle", glob="*.py"))}
    assert python == {"src/greet.py", "src/deep/more.py"}
    top = _search(tool_world, resource_id, "needle", glob="*.md", path="src")
    assert top.splitlines()[0].startswith("no match for 'needle' in 0 files searched")


@pytest.mark.parametrize("resource_id", [GIT, FILES, LAYERED])
def test_binary_files_and_files_over_1_mib_are_skipped_and_counted(
    tool_world: ToolWorld, resource_id: str
) -> None:
    huge = "needle\n" + "x" * MAX_SIZE  # one byte too many
    at_limit = "needle\n" + "x" * (MAX_SIZE - len("needle\n"))  # exactly 1 MiB: searched
    _seed(tool_world, resource_id, {"big/huge.txt": huge, "big/limit.txt": at_limit})
    late_nul = "needle\n" + "y" * SNIFF + "\x00"  # its NUL lies past the first 8 KiB
    _seed(tool_world, resource_id, {"data/late.txt": late_nul})
    binary = tool_world.call(
        "local/write-file",
        {
            "resource": resource_id,
            "path": "data/blob.bin",
            "content": "bmVlZGxlAG5lZWRsZQo=",  # b"needle\x00needle\n"
            "encoding": "base64",
        },
    )
    assert binary.ok, binary.output
    files = _files(tool_world, resource_id)
    binaries = sum(
        1 for data in files.values() if len(data) <= MAX_SIZE and b"\x00" in data[:SNIFF]
    )
    assert binaries >= 1  # blob.bin (and the fixture's logo.bin)

    output = _search(tool_world, resource_id, "needle")

    reported = _reported(output)
    assert reported == _expected(files, "needle")
    assert ("big/limit.txt", 1) in reported and ("data/late.txt", 1) in reported
    assert not any(p in ("big/huge.txt", "data/blob.bin") for p, _ in reported)
    binary_files = f"{binaries} binary file" + ("s" if binaries > 1 else "")
    assert output.splitlines()[1] == f"skipped: {binary_files}, 1 file over 1 MiB"


@pytest.mark.parametrize("resource_id", [FILES, LAYERED])
def test_at_most_200_lines_are_shown_and_every_match_is_counted(
    tool_world: ToolWorld, resource_id: str
) -> None:
    many = "".join(f"needle {n}\n" for n in range(SHOWN + 50))
    _seed(tool_world, resource_id, {"a/many.txt": many, "b/few.txt": "needle\n" * 10})
    expected = _expected(_files(tool_world, resource_id), "needle")
    assert len(expected) == SHOWN + 60

    output = _search(tool_world, resource_id, "needle")

    lines = output.splitlines()
    assert lines[0].startswith(f"{SHOWN + 60} matches in 2 files (")
    assert _reported(output) == expected[:SHOWN]  # the first ones, in order
    assert lines[-1] == "… more matches not shown: narrow the search with path or glob"
    narrowed = _search(tool_world, resource_id, "needle", path="b")
    assert _reported(narrowed) == [("b/few.txt", n) for n in range(1, 11)]
    assert "more matches" not in narrowed


@pytest.mark.parametrize("resource_id", [FILES, LAYERED])
def test_a_long_or_unprintable_line_is_cut_and_escaped_on_its_line(
    tool_world: ToolWorld, resource_id: str
) -> None:
    long = "needle " + "z" * 400
    _seed(tool_world, resource_id, {"odd.txt": f"\t\x1b[31mneedle\x1b[0m  \n{long}\n"})

    lines = _search(tool_world, resource_id, "needle", glob="odd.txt").splitlines()

    assert lines[1] == "odd.txt:1: \\x1b[31mneedle\\x1b[0m"
    assert lines[2] == "odd.txt:2: " + long[:200] + "…"


@pytest.mark.parametrize("resource_id", [FILES, GIT])
def test_a_symlink_is_never_followed(tool_world: ToolWorld, resource_id: str) -> None:
    workdir = tool_world.workdir(resource_id)
    (workdir / "out").symlink_to(tool_world.tmp, target_is_directory=True)  # holds canary.txt
    (workdir / "canary-link.txt").symlink_to(tool_world.canary)
    _seed(tool_world, resource_id, {"real.txt": "needle\n"})
    made = tool_world.call(
        "local/symlink", {"resource": resource_id, "path": "inside.txt", "target": "real.txt"}
    )
    assert made.ok, made.output

    canary = _search(tool_world, resource_id, "must never change")
    found = _search(tool_world, resource_id, "needle")

    assert canary.startswith("no match for 'must never change' in ")
    assert _reported(found) == [("real.txt", 1)]  # not inside.txt, the link to it


def test_a_symlink_in_an_overlay_is_never_followed(tool_world: ToolWorld) -> None:
    _seed(tool_world, LAYERED, {"real.txt": "needle\n"})
    made = tool_world.call(
        "local/symlink", {"resource": LAYERED, "path": "inside.txt", "target": "real.txt"}
    )
    assert made.ok, made.output

    assert _reported(_search(tool_world, LAYERED, "needle")) == [("real.txt", 1)]


@pytest.mark.parametrize("resource_id", [FILES, LAYERED])
def test_past_the_file_cap_the_top_levels_are_searched_and_it_says_so(
    tool_world: ToolWorld, resource_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_tool, "MAX_FILES", 2)
    _seed(tool_world, resource_id, {"a/b/deep.txt": "needle\n", "top.txt": "needle\n"})

    output = _search(tool_world, resource_id, "needle")

    # top.txt and docs/guide.md, the shallowest two, are searched; a/b/deep.txt is not
    assert _reported(output) == [("top.txt", 1)]
    assert output.splitlines()[0] == "1 match in 1 file (2 files searched)"
    assert output.splitlines()[-1] == (
        "… not every file was searched (at most 2 files, the top levels first): narrow the "
        "search with path or glob"
    )


@pytest.mark.parametrize("resource_id", [FILES, LAYERED])
def test_bad_searches_are_refused(tool_world: ToolWorld, resource_id: str) -> None:
    for arguments, said in (
        ({"text": ""}, "argument 'text' must not be empty"),
        ({"text": "two\nlines"}, "text must be one line"),
        ({"text": "x", "path": "docs/guide.md"}, "docs/guide.md is a file, not a folder"),
        ({"text": "x", "path": "no/such"}, "no/such does not exist"),
        ({"text": "x", "path": "../"}, "leaves the sandbox"),
        ({"text": "x", "path": ".git"}, "metadata"),
        ({"text": "x", "glob": ""}, "argument 'glob' must not be empty"),
        ({"text": "x", "ignore_case": "yes"}, "must be true or false"),
        ({"text": "x", "regex": True}, "unknown argument 'regex'"),
    ):
        refused = tool_world.call("local/search-files", {"resource": resource_id, **arguments})
        assert not refused.ok and said in refused.output, (arguments, refused.output)
        assert refused.output.startswith("local/search-files: ")
        assert refused.writes == ()


def test_a_database_has_no_files_to_search(tool_world: ToolWorld) -> None:
    refused = tool_world.call("local/search-files", {"resource": DB, "text": "hello"})
    assert not refused.ok
    assert "has no files" in refused.output


def test_it_reads_only_so_it_runs_in_strategize(tool_world: ToolWorld) -> None:
    spec = default_registry().get("local/search-files")
    assert spec is not None and spec.reads_only
    assert spec.side_effects == ("reads:files",)

    outcome = tool_world.call(
        "local/search-files", {"resource": FILES, "text": "guide"}, Phase.STRATEGIZE
    )

    assert outcome.ok, outcome.output
    assert outcome.writes == ()
    assert _reported(outcome.output) == [("docs/guide.md", 1)]
    assert tool_world.sandboxes.modified() == set()
