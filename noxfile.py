"""Developer sessions: ``nox -s lint typecheck tests`` before a push, ``nox -s bench`` for figures."""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["lint", "typecheck", "tests"]
nox.options.default_venv_backend = "venv"


@nox.session
def lint(session: nox.Session) -> None:
    """ruff (lint and format check), the import-linter layer contracts, and vulture (no code
    that nothing uses; settings in pyproject.toml, exceptions in vulture_whitelist.py)."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("lint-imports")
    session.run("vulture")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy over the package and the tests, strict on domain/, engine/, sandbox/ and store/."""
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


@nox.session
def soak(session: nox.Session) -> None:
    """The reliability loops, longer: every failpoint of both stages killed at its first and
    last hit, every git call of the fault loop failed, and AGENTS_SOAK_ITERATIONS (default
    25) seeded-random crash points per stage. Figures go to AGENTS_RELIABILITY_FIGURES, and
    from there to the generated block of docs/reliability.md."""
    session.install("-e", ".[dev]")
    iterations = os.environ.get("AGENTS_SOAK_ITERATIONS", "25")
    session.run(
        "pytest",
        "-s",
        "--timeout=0",
        "tests/reliability",
        *session.posargs,
        env={"AGENTS_SOAK_ITERATIONS": iterations, "HYPOTHESIS_PROFILE": "soak"},
    )
    session.run("python", "-m", "tests.reliability.figures")
