"""``local/search-files``: where a fixed string occurs in a resource's files, as ``grep -rnF``.

A model in a project it has not seen finds where a name is defined and used without reading
file after file, in Strategize too (it only reads). The text is a fixed string, never a
regular expression: an agent's pattern could backtrack for ever. It uses nothing but the
listing and reads of :class:`~cleveragents_tui.actors.sandbox_files.SandboxFiles`, so it
searches workdir and overlay sandboxes alike, never through a symlink, and sees what the plan
wrote. Its bounds keep a call cheap and its answer short: files too large or binary are
skipped (and counted), and the matching lines shown and the files searched are capped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Final

from cleveragents_tui.actors.file_tools import FOLDER, RESOURCE, FileTool, folder_of
from cleveragents_tui.actors.sandbox_files import FileRefused, Kind, Listed, SandboxFiles
from cleveragents_tui.actors.tool_support import OUTPUT_LIMIT, Arguments, Param, ParamType
from cleveragents_tui.domain.display import printable, shorten
from cleveragents_tui.domain.tool import ToolCategory, ToolSpec
from cleveragents_tui.domain.wording import counted

SHOWN: Final = 200  # matching lines shown; the header still counts them all
LINE_CHARS: Final = 200  # of a matching line shown
MAX_FILES: Final = 5000  # files searched at most, the top levels first
MAX_SIZE: Final = 1024 * 1024  # bytes: a larger file (a dump, a bundle) is skipped
SNIFF: Final = 8 * 1024  # bytes looked at for a NUL: such a file is binary and skipped
ENTRIES: Final = 50_000  # entries of the listing looked at: a huge tree costs no more

_NARROW: Final = "narrow the search with path or glob"


class SearchFiles(FileTool):
    spec = ToolSpec(
        name="local/search-files",
        category=ToolCategory.READ,
        description=f"Find a fixed string (not a regular expression) in the text files of a "
        f"resource, like grep -rnF: each matching line as path:LINE: text (at most {SHOWN} "
        f"shown; binary files and files over 1 MiB skipped; symlinks never followed).",
        side_effects=("reads:files",),  # what it found is what the actor decided on next
    )
    params = (
        RESOURCE,
        Param(
            "text",
            ParamType.TEXT,
            "the fixed string to find, on one line (matched as written, not a regular expression)",
        ),
        FOLDER,
        Param(
            "ignore_case",
            ParamType.BOOL,
            "true: match regardless of case; omitted or false: case matters",
            required=False,
        ),
        Param(
            "glob",
            ParamType.TEXT,
            "search only the files whose path in the resource or whose name matches this "
            "fnmatch pattern, e.g. *.py or src/*.py",
            required=False,
        ),
    )

    def change(self, files: SandboxFiles, arguments: Arguments) -> str:
        text = arguments.text("text")
        if "\n" in text or "\r" in text:
            raise FileRefused("text must be one line: files are searched line by line")
        entries, more = files.listing(folder_of(arguments), ENTRIES)
        glob = arguments.optional_text("glob")
        candidates = [e for e in entries if e.kind is Kind.FILE and _selected(e.path, glob)]
        chosen = _top_levels_first(candidates, MAX_FILES)
        search = _Search(text, bool(arguments.flag("ignore_case")))
        small = [e.path for e in chosen if e.size <= MAX_SIZE]  # the rest: not read at all
        search.large += len(chosen) - len(small)
        for path, data, total in files.read_listed(small, MAX_SIZE + 1):
            search.file(path, data, total)
        return search.report(capped=more or len(chosen) < len(candidates))


def _selected(path: str, glob: str | None) -> bool:
    """Whether ``glob`` (case-sensitive, as the tree's names are) matches the path or name."""
    if glob is None:
        return True
    return fnmatchcase(path, glob) or fnmatchcase(path.rsplit("/", 1)[-1], glob)


def _top_levels_first(candidates: list[Listed], limit: int) -> list[Listed]:
    """At most ``limit`` files, the shallowest kept (as a listing keeps its top levels),
    still in the listing's order so the output stays the same from call to call."""
    if len(candidates) <= limit:
        return candidates
    kept = set(sorted(candidates, key=lambda e: e.path.count("/"))[:limit])
    return [e for e in candidates if e in kept]


@dataclass
class _Search:
    """The matches of one call, file by file, and what was skipped."""

    text: str
    ignore_case: bool
    shown: list[str] = field(default_factory=list)
    shown_chars: int = 0
    matches: int = 0
    files_matched: int = 0
    searched: int = 0
    binary: int = 0
    large: int = 0
    unreadable: int = 0

    def file(self, path: str, data: bytes | None, total: int) -> None:
        if data is None:  # removed meanwhile, or no longer a regular file
            self.unreadable += 1
            return
        if total > MAX_SIZE:  # grew since it was listed
            self.large += 1
            return
        if b"\x00" in data[:SNIFF]:
            self.binary += 1
            return
        self.searched += 1
        content = data.decode("utf-8", errors="replace")
        needle = self.text.casefold() if self.ignore_case else self.text
        if needle not in (content.casefold() if self.ignore_case else content):
            return
        found = 0
        for number, line in enumerate(content.split("\n"), start=1):
            if needle in (line.casefold() if self.ignore_case else line):
                found += 1
                self._show(path, number, line)
        self.matches += found
        self.files_matched += 1 if found else 0

    def _show(self, path: str, number: int, line: str) -> None:
        text = line.strip()
        cut = text[:LINE_CHARS] + ("…" if len(text) > LINE_CHARS else "")
        shown = f"{printable(path, one_line=True)}:{number}: {printable(cut, one_line=True)}"
        if len(self.shown) < SHOWN and self.shown_chars + len(shown) < OUTPUT_LIMIT:
            self.shown.append(shown)
            self.shown_chars += len(shown) + 1

    def report(self, capped: bool) -> str:
        searched = counted(self.searched, "file")
        if self.matches:
            matched = counted(self.files_matched, "file")
            lines = [
                f"{counted(self.matches, 'match', 'matches')} in {matched} ({searched} searched)"
            ]
        else:
            lines = [f"no match for {shorten(repr(self.text), LINE_CHARS)} in {searched} searched"]
        skipped = [
            counted(number, one, many)
            for number, one, many in (
                (self.binary, "binary file", "binary files"),
                (self.large, "file over 1 MiB", "files over 1 MiB"),
                (self.unreadable, "unreadable file", "unreadable files"),
            )
            if number
        ]
        if skipped:
            lines.append(f"skipped: {', '.join(skipped)}")
        lines += self.shown
        if self.matches > len(self.shown):
            lines.append(f"… more matches not shown: {_NARROW}")
        if capped:
            lines.append(
                f"… not every file was searched (at most {MAX_FILES} files, the top levels "
                f"first): {_NARROW}"
            )
        return "\n".join(lines)
