"""Write a decision tree to a file, as JSON or PNG: the one export the CLI
(``agents plan tree -o``) and the app (``x`` on a plan) share."""

from __future__ import annotations

import json
from pathlib import Path

from cleveragents_tui.domain.display import json_controls_escaped
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.domain.views import PlanTree
from cleveragents_tui.export import json as export_json
from cleveragents_tui.export import png as export_png

FORMATS = {".json": "json", ".png": "png"}


def check_output(path: Path, *, force: bool, hint: str = "pass --force to overwrite it") -> None:
    """Refuse, before any work, an output file that cannot or should not be written."""
    parent = path.parent
    if not parent.is_dir():
        raise UserError(
            f"cannot write {path}: the folder {parent} does not exist",
            "create it first or choose another file name",
        )
    if path.is_dir():
        raise UserError(f"cannot write {path}: it is a folder", "choose a file name")
    if path.exists() and not force:
        raise UserError(f"{path} already exists", hint)


def write_text(path: Path, text: str, *, force: bool) -> None:
    """Write ``text``; without ``force`` an existing file is never replaced (even one that
    appeared after :func:`check_output`)."""
    try:
        with path.open("w" if force else "x", encoding="utf-8") as fh:
            fh.write(text)
    except FileExistsError:
        raise UserError(f"{path} already exists", "pass --force to overwrite it") from None


def format_of(path: Path) -> str:
    """``json`` or ``png``, from the file name's suffix."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise UserError(
            f"cannot tell the format of {path.name}", "end the file name in .json or .png"
        )
    return fmt


def export_tree(tree: PlanTree, path: Path, *, force: bool = False) -> str:
    """Write ``tree`` to ``path`` in the format its suffix names; returns what was written,
    in one line for the user."""
    fmt = format_of(path)
    check_output(path, force=force)
    if fmt == "png":
        width, height = export_png.render_tree_png(tree, path)
        return f"wrote {path} ({width}×{height} px, {len(tree.lines)} decisions)"
    document = json_controls_escaped(
        json.dumps(export_json.plan_tree_document(tree), indent=2, ensure_ascii=False)
    )
    write_text(path, document + "\n", force=force)
    return f"wrote {path} ({len(tree.lines)} decisions)"
