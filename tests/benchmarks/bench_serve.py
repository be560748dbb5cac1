"""``agents serve``, from the command's start to the app's first painted screen in Chromium.

Timed from spawning ``agents serve`` (on the demo plan's database) until the page shows the
plan list: the server's start, the login redirect, textual-serve's page and script, the
websocket, the tab's app process (Python, Textual, the engine, the database) and its first
frame, read from xterm.js's buffer. The browser is already running; each run gets a fresh
context. The tab's app process that ``agents serve`` starts ahead, first thing, is part of
the command timed: nothing is warm but the disk cache and the browser.

Baselines, measured in the same run with the same browser and the same readiness rule
(listening, then announced on stdout):

- **textual-serve, hello app**: textual-serve itself (no token, no hardening) serving a
  one-widget Textual app. The fair floor for "a Textual app in a browser tab": the same
  page, websocket and app process, so the ratio is what our app and our checks add.
- **static page, plain aiohttp**: an aiohttp server answering one HTML page: how long a
  Python web server and a page load take at all on this machine.

Needs Debian's chromium; without it this module reports nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page, sync_playwright

from cleveragents_tui.engine.demo.demo import build_demo
from cleveragents_tui.engine.run.runner import RunOptions, start_plan
from cleveragents_tui.engine.setup.actions import load_action
from cleveragents_tui.store.store import Store
from tests.benchmarks.harness import Measurement
from tests.web.browser import CHROMIUM, VIEWPORT, Terminal, launch
from tests.web.serve_process import free_port

TOKEN = "bench-token-0123456789abcdef"

HELLO_APP = """
from textual.app import App
from textual.widgets import Static

class Hello(App):
    def compose(self):
        yield Static("hello from textual")

Hello().run()
"""

TEXTUAL_SERVE = """
import asyncio, sys
from aiohttp import web
from textual_serve.server import Server

async def main():
    server = Server(sys.argv[1], host="127.0.0.1", port=int(sys.argv[2]))
    runner = web.AppRunner(await server._make_app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", server.port).start()
    print("ready", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""

STATIC = """
import asyncio, sys
from aiohttp import web

async def page(request):
    return web.Response(text="<!DOCTYPE html><p id=hello>hello from aiohttp</p>", content_type="text/html")

async def main():
    app = web.Application()
    app.router.add_get("/", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", int(sys.argv[1])).start()
    print("ready", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


@contextmanager
def _server(command: list[str], ready: str) -> Iterator[None]:
    """Start a server and return once it printed a line starting with ``ready``."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith(ready):
                break
        else:
            raise RuntimeError(f"{command} exited before it was ready")
        yield
    finally:
        process.terminate()
        process.wait(timeout=60)


def _first_paint(browser: Browser, command: list[str], ready: str, url: str, text: str) -> float:
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    page: Page = context.new_page()
    terminal = Terminal(page)
    try:
        start = time.perf_counter()
        with _server(command, ready):
            page.goto(url)
            terminal.wait_until(
                "t => document.body.innerText.includes(t) || window.__agentsScreen().includes(t)",
                text,
                f"no first paint of {text!r}",
            )
            return time.perf_counter() - start
    finally:
        context.close()


def _demo_database(folder: Path) -> str:
    database = str(folder / "agents.db")
    store = Store.open(database)
    try:
        env = build_demo(store, folder / "demo")
        start_plan(
            store,
            load_action(str(env.action_file)),
            profile_override="auto",
            options=RunOptions(sandbox_base=folder / "sandboxes"),
        )
    finally:
        store.close()
    return database


def run(quick: bool) -> list[Measurement]:
    if not CHROMIUM.exists():
        print(f"  (skipped: no Chromium at {CHROMIUM})")
        return []
    repeat = 2 if quick else 5
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        folder = Path(tmp)
        saved = os.environ.get("AGENTS_SANDBOX_DIR")
        os.environ["AGENTS_SANDBOX_DIR"] = str(folder / "sandboxes")  # the server inherits it
        database = _demo_database(folder)
        (folder / "hello.py").write_text(HELLO_APP)
        browser = launch(playwright)
        try:

            def ours() -> float:
                port = free_port()
                command = [python, "-m", "cleveragents_tui", "--db", database, "serve"]
                return _first_paint(
                    browser,
                    [*command, "--port", str(port), "--token", TOKEN],
                    "agents serve: ",
                    f"http://127.0.0.1:{port}/?token={TOKEN}",
                    "2 of 2 plans",
                )

            def hello() -> float:
                port = free_port()
                app = f"{python} {folder / 'hello.py'}"
                return _first_paint(
                    browser,
                    [python, "-c", TEXTUAL_SERVE, app, str(port)],
                    "ready",
                    f"http://127.0.0.1:{port}/",
                    "hello from textual",
                )

            def static() -> float:
                port = free_port()
                return _first_paint(
                    browser,
                    [python, "-c", STATIC, str(port)],
                    "ready",
                    f"http://127.0.0.1:{port}/",
                    "hello from aiohttp",
                )

            ours(), hello(), static()  # warm the disk cache and the browser
            served = min(ours() for _ in range(repeat))
            floor = min(hello() for _ in range(repeat))
            page = min(static() for _ in range(repeat))
        finally:
            browser.close()
            if saved is None:
                del os.environ["AGENTS_SANDBOX_DIR"]
            else:
                os.environ["AGENTS_SANDBOX_DIR"] = saved
    name = "agents serve start → first painted plan list in Chromium"
    return [
        Measurement(
            "serve",
            name,
            served,
            "textual-serve, one-widget app",
            floor,
            "≤ 2× (what our app and checks add)",
            served <= 2 * floor,
        ),
        Measurement("serve", name, served, "static page, plain aiohttp", page, "(context)", None),
    ]
