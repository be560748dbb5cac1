"""Where the server listens and the one address people open (its public URL).

The public URL decides the Origin a browser must send on the websocket: a page from any
other origin is refused (DESIGN.md section 8: textual-serve checks none).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from cleveragents_tui.domain.errors import UserError

WILDCARDS = frozenset({"", "0.0.0.0", "::"})  # noqa: S104 - names of the wildcards, not a bind
DEFAULT_PORTS = {"http": 80, "https": 443}


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses; any other name counts as reachable
    from the network (a name could resolve anywhere)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _netloc(host: str, port: int, scheme: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return shown if DEFAULT_PORTS.get(scheme) == port else f"{shown}:{port}"


def default_public_url(host: str, port: int) -> str:
    """``http://HOST:PORT``; a wildcard bind has no such address, so it needs --public-url."""
    if host in WILDCARDS:
        raise UserError(
            f"--host {host or '(empty)'} listens on every interface, so there is no single address to open",
            "also pass --public-url with the address people open (e.g. http://build-box:8000)",
        )
    return f"http://{_netloc(host, port, 'http')}"


def normalise_public_url(raw: str) -> tuple[str, str]:
    """``(public_url, origin)`` of what the user typed: http(s), a host, an optional port
    and path; no credentials, query or fragment. The URL loses its trailing slash."""
    problem = f"--public-url {raw!r} is not an http(s) address people can open"
    fix = "give the scheme, host and port people use, e.g. https://agents.example.com"
    try:
        parts = urlsplit(raw.strip())
        port = parts.port
    except ValueError as exc:
        raise UserError(problem, fix) from exc
    scheme = parts.scheme.lower()
    if (
        scheme not in DEFAULT_PORTS
        or not parts.hostname
        or parts.username is not None
        or parts.query
        or parts.fragment
    ):
        raise UserError(problem, fix)
    host = parts.hostname.lower()
    origin = f"{scheme}://{_netloc(host, port or DEFAULT_PORTS[scheme], scheme)}"
    return origin + parts.path.rstrip("/"), origin
