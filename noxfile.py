"""Developer sessions: ``nox -s lint typecheck tests`` before a push, ``nox -s bench`` for figures."""

from __future__ import annotations

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.default_venv_backend = "venv"


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format check) and the import-linter layer contracts."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy, strict on domain/, engine/, sandbox/ and store/."""
    session.install("-e", ".[dev]")
    session.run("mypy")


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite (PostgreSQL tests start their own throwaway server)."""
    session.install("-e", ".[dev]")
    session.run("pytest", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks; writes their figures, as ratios to same-run baselines, to docs/benchmarks.md."""
    session.install("-e", ".[dev]")
    session.run("python", "-m", "tests.benchmarks.run", *session.posargs)
