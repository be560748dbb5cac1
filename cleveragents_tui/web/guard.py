"""The checks textual-serve does not make, in front of every route (DESIGN.md section 8).

- **Token, then cookie**: ``?token=...`` (the shared token or a user's) is exchanged for a
  login cookie and the browser is sent back to the same address without it; every other
  request needs that cookie — from the address that logged in, before the login expires,
  while its user is still allowed — the websocket included.
- **Logged values are quoted** (``%r``): a path, header or name sent by anyone can neither
  forge a log line nor reach the operator's terminal as an escape sequence.
- **Origin**: the websocket, and any request that is not GET/HEAD/OPTIONS, must come from a
  page of the public URL's origin, so another site's page cannot drive the app even in a
  browser that holds the cookie.
- **Headers**: no framing, no referrer (the first URL carries the token), no caching, and
  a Content-Security-Policy that allows only this server's scripts and websocket.
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from cleveragents_tui.web.access import Access
from cleveragents_tui.web.config import ServeConfig
from cleveragents_tui.web.logins import Logins, cookie_name

log = logging.getLogger("agents.serve")

USER_KEY = web.RequestKey("agents_user", str)
LOGIN_KEY = web.RequestKey("agents_login", str)  # the login's digest: its tabs are tracked
WEBSOCKET_PATH = "/ws"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

NO_LOGIN = (
    "This agents server needs its access token. Open the address that `agents serve` "
    "printed (it ends in ?token=...), or ask whoever runs the server for yours."
)
WRONG_ACCESS = (
    "That token is not valid for this server (it may have restarted with a new one). "
    "Open the address that `agents serve` printed, or ask whoever runs the server."
)


def _headers(config: ServeConfig) -> dict[str, str]:
    websocket_origin = "ws" + config.origin.removeprefix("http")
    policy = (
        "default-src 'self'; script-src 'self' 'unsafe-inline'; "
        "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
        f"connect-src 'self' {websocket_origin}; frame-ancestors 'none'; base-uri 'none'; "
        "form-action 'none'"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def origin_refusal(config: ServeConfig, request: web.Request) -> web.HTTPForbidden:
    sent = request.headers.get("Origin", "(none)")
    log.warning("refused %r %r from origin %r", request.method, request.path, sent)
    return web.HTTPForbidden(
        text=f"Refused: this request came from the origin {sent}; this server accepts only its "
        f"own pages, at {config.origin}. Open {config.public_url}/ (behind a reverse proxy, "
        "start agents serve with --public-url set to the address people open)."
    )


def _same_address_without_token(request: web.Request) -> str:
    """A relative reference (``./NAME?QUERY``): it keeps the host the browser used and any
    path prefix a reverse proxy adds in front of ours."""
    url = request.rel_url.without_query_params("token")
    name = url.path.rsplit("/", 1)[-1]
    return f"./{name}" + (f"?{url.query_string}" if url.query_string else "")


def _login(
    config: ServeConfig, access: Access, logins: Logins, request: web.Request, token: str
) -> None:
    """SameSite=Lax, not Strict: a link to the printed address clicked on another site
    (chat, webmail) must land logged in, and a Strict cookie set on this redirect would be
    withheld from the redirected request. Lax still keeps the cookie off other sites'
    subrequests and non-GETs; the websocket and every non-GET need the public Origin."""
    known, name = access.credentials.identify(token)
    if not known:
        log.warning("refused a wrong token from %r", request.remote)
        raise web.HTTPUnauthorized(text=WRONG_ACCESS)
    login, user = logins.open(name, request.remote)
    log.info("login: %r from %r", user, request.remote)
    response = web.HTTPSeeOther(_same_address_without_token(request))
    response.set_cookie(
        cookie_name(config.public_url),
        login,
        httponly=True,
        samesite="Lax",
        secure=config.secure,
        path="/",
        max_age=int(config.login_lifetime),
    )
    raise response


def guard(config: ServeConfig, access: Access, logins: Logins) -> Middleware:
    headers = _headers(config)
    cookie = cookie_name(config.public_url)

    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        needs_origin = request.path == WEBSOCKET_PATH or request.method not in SAFE_METHODS
        if needs_origin and request.headers.get("Origin") != config.origin:
            raise origin_refusal(config, request)
        token = request.query.get("token")
        if token is not None:
            _login(config, access, logins, request, token)
        found = logins.user(request.cookies.get(cookie), request.remote)
        if found is None or not access.allows(found[1]):
            raise web.HTTPUnauthorized(text=NO_LOGIN)
        request[LOGIN_KEY], request[USER_KEY] = found
        return await handler(request)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await check(request, handler)
        except web.HTTPException as refusal:
            refusal.headers.update(headers)
            raise
        if not response.prepared:  # a websocket has sent its headers already
            response.headers.update(headers)
        return response

    return middleware
