"""What every command shares: the database URL, the output format, the opened store."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import click

from cleveragents_tui.domain.display import json_controls_escaped, printable

if TYPE_CHECKING:  # SQLAlchemy is imported when a command opens the store, not at start-up
    from cleveragents_tui.store.store import Store


@dataclass
class CliContext:
    db_url: str | None
    output_format: str | None
    progress: bool | None = None  # --progress / --no-progress; None: when stderr is a terminal
    _store: Store | None = field(default=None, repr=False)

    @property
    def store(self) -> Store:
        if self._store is None:
            from cleveragents_tui.store.store import Store

            self._store = Store.open(self.db_url)
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def wants_json(self, local_format: str | None) -> bool:
        return (local_format or self.output_format or "text") == "json"


pass_cli = click.make_pass_decorator(CliContext)
F = TypeVar("F", bound=Callable[..., Any])

format_option = click.option(
    "--format",
    "local_format",
    type=click.Choice(["text", "json"]),
    default=None,
    help="Output as text (default) or as a stable JSON document (see docs/json-formats.md).",
)


def output_file_options(output_help: str) -> Callable[[F], F]:
    """``-o/--output FILE`` and ``--force`` (keep an existing file unless given), for a
    command that prints its result or writes it to a file."""

    def add(command: F) -> F:
        output = click.option(
            "-o",
            "--output",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            metavar="FILE",
            help=output_help,
        )
        force = click.option("--force", is_flag=True, help="Overwrite FILE if it already exists.")
        return output(force(command))

    return add


CLEAR_ROW = "\r\x1b[2K"  # back to the row's start, erased: the progress's row of a wait


def echo(message: str = "", *, err: bool = False) -> None:
    """The one way the CLI prints: decisions, guidance, titles and ids come from users, agents
    and files, so every control character is shown escaped (docs/security.md, "Terminal
    escapes") — none reaches the terminal, even through a pipe."""
    click.echo(printable(message), err=err)


def json_text(document: object) -> str:
    """``document`` as indented JSON whose strings carry every control character escaped
    (``json`` alone leaves DEL and the C1 range raw); non-ASCII text stays readable."""
    return json_controls_escaped(json.dumps(document, indent=2, ensure_ascii=False))


def echo_json(document: dict[str, Any]) -> None:
    echo(json_text(document))


def echo_either(
    cli: CliContext,
    local_format: str | None,
    document: Callable[[], dict[str, Any]],
    text: Callable[[], str],
) -> None:
    """What a command that shows one thing prints: its JSON document, or its text (only the
    one asked for is built)."""
    if cli.wants_json(local_format):
        echo_json(document())
    else:
        echo(text())


ItemT = TypeVar("ItemT")


@dataclass(frozen=True)
class Listing(Generic[ItemT]):
    """What a ``list`` command shows: its ``items`` as a JSON ``document``, or one ``line``
    an item, or ``empty`` (how to make the first one) when there is none."""

    items: Sequence[ItemT]
    document: Callable[[Sequence[ItemT]], dict[str, Any]]
    empty: str
    line: Callable[[ItemT], str]


def list_command(
    group: click.Group,
) -> Callable[[Callable[[CliContext], Listing[Any]]], click.Command]:
    """``group``'s ``list`` command, with ``--format``: it prints the listing the decorated
    function makes, whose docstring is the command's help."""

    def decorate(listing: Callable[[CliContext], Listing[Any]]) -> click.Command:
        @group.command("list", help=listing.__doc__)
        @format_option
        @pass_cli
        def list_(cli: CliContext, local_format: str | None) -> None:
            shown = listing(cli)
            if cli.wants_json(local_format):
                echo_json(shown.document(shown.items))
            elif not shown.items:
                echo(shown.empty)
            else:
                for item in shown.items:
                    echo(shown.line(item))

        return list_

    return decorate
