"""``agents serve``: the app in the browser, over a hardened textual-serve (docs/web.md).

The server itself (aiohttp, textual-serve) is imported only when it really serves, so the
other commands never load it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cleveragents_tui.cli.context import CliContext, echo, pass_cli
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.web.addresses import default_public_url, normalise_public_url
from cleveragents_tui.web.config import DEFAULT_MAX_SESSIONS, ServeConfig
from cleveragents_tui.web.credentials import TOKEN_ENV, add_user, remove_user
from cleveragents_tui.web.logins import DEFAULT_IDLE_HOURS, DEFAULT_LIFETIME_HOURS
from cleveragents_tui.web.revocations import revocations_file, revoke_login


def _announce(config: ServeConfig, shown_database: str, users: Path | None) -> None:
    echo(
        f"agents serve: the app on {shown_database} at {config.public_url}/ "
        f"(listening on {config.host}:{config.port}, up to {config.max_sessions} sessions; "
        "Ctrl+C stops)"
    )
    if users is not None:
        echo(f"users from {users}: each opens {config.public_url}/?token=THEIR_TOKEN")
    if config.shared_token is not None:
        echo(f"open: {config.public_url}/?token={config.shared_token}")
    sys.stdout.flush()  # the URL line is what a script (or a test) waits for


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(1, 65535), default=8000, show_default=True, help="Port."
)
@click.option(
    "--public-url",
    metavar="URL",
    help="The address people open (default http://HOST:PORT); behind a reverse proxy, the "
    "proxy's address. Browsers' websockets must come from its origin.",
)
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    metavar="TOKEN",
    help=f"The shared access token (default: a new one each start). Env: {TOKEN_ENV} "
    "(better than the option: other users can read a command line).",
)
@click.option(
    "--users",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="Per-user tokens ('NAME sha256:HEX' lines): approvals and corrections are recorded "
    "under each person's name.",
)
@click.option(
    "--add-user",
    "new_user",
    metavar="NAME",
    help="Add NAME to the --users file with a new token, print their URL, and exit.",
)
@click.option(
    "--revoke",
    metavar="NAME",
    help="Remove NAME from the --users file, or end one shared-token login (web:3f9a12cd, "
    "as the log names it), and exit: a running server ends those logins and tabs at once.",
)
@click.option(
    "--login-idle",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_IDLE_HOURS,
    show_default=True,
    metavar="HOURS",
    help="A login unused this long (no open tab) ends; open the address again.",
)
@click.option(
    "--login-lifetime",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_LIFETIME_HOURS,
    show_default=True,
    metavar="HOURS",
    help="A login ends this long after it was made, open tabs included.",
)
@click.option(
    "--export-dir",
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="Tree exports from the browser are saved in DIR on the server (default: the "
    "browser downloads them; no other path on the server is written).",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_SESSIONS,
    show_default=True,
    help="Browser tabs open at once (each runs its own app process).",
)
@pass_cli
def serve(
    cli: CliContext,
    host: str,
    port: int,
    public_url: str | None,
    token: str | None,
    users: Path | None,
    new_user: str | None,
    revoke: str | None,
    login_idle: float,
    login_lifetime: float,
    export_dir: Path | None,
    max_sessions: int,
) -> None:
    """Serve the app to browsers: every tab gets the full app on this database (--db).

    \b
    Access needs a token: the one printed at start (or --token / AGENTS_SERVE_TOKEN), or
    a person's own from --users FILE. Listening beyond this machine (--host) needs one
    given on purpose. Use PostgreSQL (--db postgresql://...) for a team. See docs/web.md.
    """
    if revoke is not None and revoke.startswith("web:"):  # one shared-token login
        revoke_login(revocations_file(), revoke)
        echo(f"revoked the login {revoke}; a running agents serve ends it and its tabs")
        return
    if revoke is not None:
        if users is None:
            raise UserError("--revoke needs --users FILE", "name the file to remove the user from")
        remove_user(users, revoke)
        echo(f"removed {revoke} from {users}; a running server ends their logins and tabs")
        return
    if new_user is not None:
        if users is None:
            raise UserError("--add-user needs --users FILE", "name the file to add the user to")
        address, _ = normalise_public_url(public_url or default_public_url(host, port))
        user_token = add_user(users, new_user)
        echo(f"added {new_user} to {users}; their address (shown once, keep it private):")
        echo(f"{address}/?token={user_token}")
        return
    from cleveragents_tui.web.sessions import start_first_app

    first_app = start_first_app()  # the first tab's app loads while the server starts
    try:
        from cleveragents_tui.store.database import normalise_url  # the URL only: no store yet

        url = normalise_url(cli.db_url)
        config = ServeConfig.build(
            host=host,
            port=port,
            database_url=url.render_as_string(hide_password=False),
            public_url=public_url,
            token=token,
            users=users,
            max_sessions=max_sessions,
            login_idle_hours=login_idle,
            login_lifetime_hours=login_lifetime,
            export_dir=export_dir,
            revocations=revocations_file(),
        )
    except BaseException:  # a user error: nobody will take that app
        first_app.kill()
        first_app.wait()
        raise
    from cleveragents_tui.web.server import serve as run_server

    shown = url.render_as_string(hide_password=True)

    def ready() -> None:
        """Listening: check the database (an empty one gets the schema), then announce. The
        store is imported only now, so the server listens sooner; each tab opens it itself."""
        from cleveragents_tui.store.store import Store

        Store.open(cli.db_url).close()  # as typed: its errors name what the user gave
        _announce(config, shown, users)

    run_server(config, ready, first_app)
