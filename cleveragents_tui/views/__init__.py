"""One rendering of each read model, shared by the CLI and the app.

Each view (``explain``, ``impact``, ``diff``) turns an engine read result into plain data —
:class:`~cleveragents_tui.views.sections.Section` s of labelled rows with an emphasis — so the
CLI and the app show the same sections and values. :func:`sections.to_plain_text` prints
them for the terminal; :func:`rich_text.to_rich` gives the app the same text, styled. Both
escape every control character (``domain.display.printable``).

Sits between the engine and the interfaces (pyproject.toml, the layers contract): the CLI,
the web server and the app import it; it imports the engine and the domain only.
"""
