"""Browser mode shared with other people, in a real Chromium: an export from the browser
never names a path on the server (it is a download, or goes into the one --export-dir),
and the printed address works when it is clicked on another site (chat, webmail)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.web.browser import Terminal
from tests.web.conftest import TOKEN, Demo, Served, serve
from tests.web.serve_process import free_port


def open_export(terminal: Terminal, served: Served) -> None:
    terminal.open(served.login())
    terminal.wait_for("2 of 2 plans")
    terminal.press("Enter")
    terminal.wait_for("decisions", "question", "x Export")  # the plan screen, loaded
    terminal.press("x")
    terminal.wait_for("Export the decision tree")


def export(terminal: Terminal, demo: Demo, name: str) -> None:
    """Replace the default file name with ``name`` and submit: a click puts the focus in
    the field (its own focus arrives a moment after the dialog's first paint), Home and
    Ctrl+K (delete to the end) erase the name in two keys; once it is gone (text sent at
    once was seen lost), ``name`` arrives as one input event. Submitted once the field
    shows it."""
    default = f"plan-{demo.plan_id[:10]}.png"
    terminal.click(default)
    terminal.press("Home", "Control+k")
    terminal.wait_gone(default)
    terminal.page.keyboard.insert_text(name)
    terminal.wait_for(name)
    terminal.press("Enter")


def test_an_export_from_the_browser_is_a_download(demo: Demo, served: Served, page: Page) -> None:
    outside = Path("/tmp") / f"agents-{demo.plan_id[-8:]}.json"  # short: the field shows it
    terminal = Terminal(page)
    open_export(terminal, served)
    terminal.wait_for("download")

    export(terminal, demo, str(outside))  # an absolute path on the server
    terminal.wait_for("Export refused")
    assert not outside.exists()

    terminal.press("x")
    terminal.wait_for("Export the decision tree")
    # the page opens the download's address in a new tab, which Chromium closes as the
    # download starts: Playwright reports the download on the page that opened it
    with page.expect_download() as downloaded:
        export(terminal, demo, "tree.json")
    download = downloaded.value
    document = json.loads(Path(download.path()).read_text("utf-8"))
    assert document["plan"]["plan_id"] == demo.plan_id
    assert not (Path.cwd() / "tree.json").exists() and not (demo.workdir / "tree.json").exists()


@pytest.fixture
def with_export_dir(demo: Demo) -> Iterator[tuple[Served, Path]]:
    folder = demo.workdir / "exports"
    folder.mkdir()
    env = {"AGENTS_SERVE_TOKEN": TOKEN}
    for served in serve(demo, "--export-dir", str(folder), env=env):
        yield served, folder


def test_an_export_goes_only_into_the_export_folder(
    demo: Demo, with_export_dir: tuple[Served, Path], page: Page
) -> None:
    served, folder = with_export_dir
    outside = demo.workdir / "settings.json"
    outside.write_text("keep")
    (folder / "link.json").symlink_to(outside)
    terminal = Terminal(page)
    open_export(terminal, served)
    terminal.wait_for("folder")

    for name in ("../settings.json", "link.json"):  # every other name: test_exports.py
        export(terminal, demo, name)
        terminal.wait_for("Export refused")
        terminal.press("x")
        terminal.wait_for("Export the decision tree")
    assert outside.read_text() == "keep"

    export(terminal, demo, "tree.json")
    terminal.wait_for("wrote")
    document = json.loads((folder / "tree.json").read_text("utf-8"))
    assert document["plan"]["plan_id"] == demo.plan_id

    terminal.press("x")  # again: it exists, so the app asks before replacing it ...
    terminal.wait_for("Export the decision tree")
    export(terminal, demo, "tree.json")
    terminal.wait_for("Replace it?")
    (folder / "tree.json").unlink()  # ... and meanwhile someone plants a link there
    (folder / "tree.json").symlink_to(outside)
    terminal.press("y")
    terminal.wait_for("is a link")
    assert outside.read_text() == "keep"


class LinkPage(BaseHTTPRequestHandler):
    """Another site's page (a chat message) with the printed address as a link."""

    target = ""

    def do_GET(self) -> None:
        body = f'<a id="go" href="{self.target}">the agents server</a>'.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        return


def test_the_printed_address_clicked_on_another_site_lands_logged_in(
    served: Served, page: Page
) -> None:
    """localhost is another site than 127.0.0.1: a Strict cookie set on the login's
    redirect would be withheld from the redirected request (a 401)."""
    LinkPage.target = served.login()
    other = ThreadingHTTPServer(("127.0.0.1", free_port()), LinkPage)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        terminal = Terminal(page)
        page.goto(f"http://localhost:{other.server_address[1]}/")
        page.click("#go")
        page.wait_for_url(served.base)
        assert "needs its access token" not in page.content()
        terminal.wait_for("2 of 2 plans")
    finally:
        other.shutdown()
        other.server_close()
