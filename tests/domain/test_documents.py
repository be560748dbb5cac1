"""Every field of every JSON document the CLI prints is documented, and built by its model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cleveragents_tui.domain.documents import DOCUMENTS, Document

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
LITERAL = re.compile(r"[\"'](cleveragents\.[a-z][a-z-]*/[0-9]+)[\"']")


def _passages(page: str, format_name: str) -> str:
    """The text that documents ``format_name`` on ``page``: from each line naming it to the
    next heading or the next list item naming another document."""
    lines = (DOCS / page).read_text(encoding="utf-8").splitlines()
    found: list[str] = []
    for start, line in enumerate(lines):
        if format_name not in line:
            continue
        found.append(line)
        for following in lines[start + 1 :]:
            if following.startswith(("#", "- `cleveragents.")):
                break
            found.append(following)
    return "\n".join(found)


def _format_of(model: type[Document]) -> str:
    default = model.model_fields["format"].default
    assert isinstance(default, str)
    return default


@pytest.mark.parametrize("model", DOCUMENTS, ids=lambda model: _format_of(model))
def test_every_field_is_documented(model: type[Document]) -> None:
    documented_as = model.DOCUMENTED_AS or _format_of(model)
    text = _passages("json-formats.md", _format_of(model))
    text += _passages("json-formats.md", documented_as)
    if model.DOC_PAGE is not None:
        text += _passages(model.DOC_PAGE, documented_as)
    assert text, f"{_format_of(model)} is not in docs/json-formats.md"
    names = [field.alias or name for name, field in model.model_fields.items()]
    missing = [
        name
        for name in names
        if name != "format" and f"`{name}`" not in text and f'"{name}"' not in text
    ]
    assert missing == [], f"{_format_of(model)}: fields not documented: {missing}"


def test_every_document_the_package_prints_has_a_model() -> None:
    """A ``"cleveragents.*/N"`` literal outside the models is a document built by hand."""
    models = REPO / "cleveragents_tui" / "domain" / "documents.py"
    strays = [
        f"{path.relative_to(REPO)}: {name}"
        for path in sorted((REPO / "cleveragents_tui").rglob("*.py"))
        if path != models
        for name in LITERAL.findall(path.read_text(encoding="utf-8"))
    ]
    assert strays == []


def test_optional_fields_are_left_out_and_order_is_kept() -> None:
    from cleveragents_tui.domain.documents import SchemaDocument, SettingDocument

    assert list(SettingDocument(key="k", scope=None, value=None).dump()) == [
        "format",
        "key",
        "scope",
        "value",
    ]
    assert (
        SettingDocument(key="k", scope="global", value=1, removed=False).dump()["removed"] is False
    )
    schema = SchemaDocument.model_validate({"database": "d", "from": None, "to": "0008"})
    assert schema.dump() == {
        "format": "cleveragents.schema/1",
        "database": "d",
        "from": None,
        "to": "0008",
    }
