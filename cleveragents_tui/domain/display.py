"""Text shown to a person, made safe for the terminal that shows it.

Decisions, guidance, plan titles, ids and file contents come from users, agents and files.
Printed raw, a control character in them is an instruction to the terminal: ``ESC]52``
writes the clipboard, ``ESC]0;`` sets the window title, ``ESC[2J`` clears the screen — even
through a pipe into a pager. Every place that shows such text (the CLI's output, log lines,
the app) passes it through :func:`printable`, which shows each control as a visible escape.
"""

from __future__ import annotations

import re

# C0 controls (but newline and tab), DEL, C1 controls, and the bidirectional overrides and
# isolates that make text read differently from how it runs ("Trojan source").
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# In a one-line context (a tree line, a table cell, an error message) also newline and tab.
_LINE_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(found: re.Match[str]) -> str:
    char = found[0]
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with every control character shown as an escape (``ESC`` as ``\\x1b``), so
    it can neither move the cursor, clear the screen, set the title nor write the clipboard.
    Newline and tab are kept, unless ``one_line`` (a line of a tree or a table) escapes them
    too."""
    return (_LINE_CONTROLS if one_line else _CONTROLS).sub(_escape, text)


def shorten(text: str, limit: int = 40) -> str:
    """``text`` as one printable line of at most ``limit`` characters (then ``…``): an id or a
    name echoed back in a message, however long the input was."""
    line = printable(text, one_line=True)
    return line if len(line) <= limit else line[:limit] + "…"


_JSON_UNESCAPED = re.compile(r"[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def json_controls_escaped(document: str) -> str:
    """A JSON document (``json.dumps(..., ensure_ascii=False)``) with the controls that
    ``json`` leaves raw — DEL, the C1 range (``\\x9b`` is a one-byte CSI) and the bidi
    overrides — written as ``\\uXXXX`` escapes. They occur only inside strings, where the
    escape means the same character: the data is unchanged, the terminal is safe."""
    return _JSON_UNESCAPED.sub(lambda found: f"\\u{ord(found[0]):04x}", document)
