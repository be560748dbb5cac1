"""A throwaway PostgreSQL server for tests: initdb + pg_ctl in a temporary folder.

PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` user
(DESIGN.md section 9). It listens on a Unix socket only, never on a network address.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from sqlalchemy import create_engine, text


def find_bindir() -> Path | None:
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: p.parent.parent.name
    )
    if candidates:
        return candidates[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class PostgresServer:
    port = 5432

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.base = Path(tempfile.mkdtemp(prefix="agents-pg-"))
        self.data = self.base / "data"
        self.sockets = self.base / "sock"
        self._user: str | None = None

    def _run(self, *args: str) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self._user:
            command = ["runuser", "-u", self._user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> None:
        self.sockets.mkdir()
        if os.geteuid() == 0:
            self._user = "postgres"
            entry = pwd.getpwnam(self._user)
            os.chmod(self.base, 0o755)  # noqa: S103 - the postgres user must reach its socket
            for path in (self.base, self.sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        options = f"-k {self.sockets} -p {self.port} -c listen_addresses='' -c fsync=off -c max_connections=200"
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.base / "log"),
            "-w",
            "start",
        )

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.sockets}&port={self.port}"

    def create_database(self, name: str) -> str:
        engine = create_engine(self.url(), isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        engine.dispose()
        return self.url(name)

    def drop_database(self, name: str) -> None:
        engine = create_engine(self.url(), isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
