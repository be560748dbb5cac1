"""Where the bundled data lives: beside the package in a wheel, at the repository root in a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_path(*parts: str) -> Path:
    """``data_path("assets", "demo", "x.yaml")``: the installed copy, else the checkout's."""
    installed = _PACKAGE.joinpath("_data", *parts)
    if installed.exists():
        return installed
    return _PACKAGE.parent.joinpath(*parts)
