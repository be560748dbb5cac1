"""Where ``agents serve`` listens: ``--host ::`` means every address, IPv4 and IPv6.

asyncio sets ``IPV6_V6ONLY`` on every IPv6 socket it creates, so ``::`` alone would refuse
IPv4 clients although docs/web.md and every other server treat it like ``0.0.0.0`` plus IPv6.
For ``::`` the socket is made here, dual-stack; any other host goes through aiohttp as is.
"""

from __future__ import annotations

import socket

from aiohttp import web

DUAL_STACK = "::"


def listening_site(runner: web.AppRunner, host: str, port: int) -> web.BaseSite:
    """The site to start for ``host``: a dual-stack socket for ``::`` where the system has
    one (an OSError such as a busy port is raised here, as ``start`` would)."""
    if host == DUAL_STACK and socket.has_dualstack_ipv6():
        sock = socket.create_server(
            (host, port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=128
        )
        return web.SockSite(runner, sock)
    return web.TCPSite(runner, host, port)
