"""A PostgreSQL database sandbox that any process can roll back exactly: copies of the database.

The savepoint sandbox (``transaction/``) lives in one connection of one process,
so each later process (each CLI command is one) *replayed* its statement log, and a schema
with ``DEFAULT now()``, ``random()``, ``gen_random_uuid()`` or a sequence replayed to other
rows: corrections were refused ("was lost on restart ... rows differ") and Apply landed
nothing. This sandbox keeps the rows the plan produced instead, as databases on the target's
server made with ``CREATE DATABASE ... TEMPLATE`` (a copy of the files: rows, sequence
values, schema, everything), named ``agents_<prefix>_<what>``:

* ``..._base``: the target as it was when the sandbox was made;
* ``..._work``: where tools run their SQL (:meth:`PostgresCopySandbox.execute`), each
  statement in a transaction of its own on a connection of its own, committed at once: no
  connection outlives an operation, so the next process finds the database as it was left;
* ``..._sp_<hex>``: one copy of ``work`` per checkpoint. :meth:`~PostgresCopySandbox.rollback`
  copies it to ``..._next``, drops ``work`` and renames ``next`` to ``work``; an operation
  that finds ``next`` finishes or undoes that (a crash leaves the old or the new rows).

Under ``root``: ``postgres_copy.json`` (resource, plan, prefix, valid checkpoints, open or
applied; no URL, so no credentials) and ``postgres_copy.flock``, held during each operation.
Copying needs that nobody else is connected to the database copied (PostgreSQL's rule for a
template), and the role needs ``CREATEDB`` and to own the target: ``database.py`` falls back
to the savepoint sandbox when either is missing. The statements ``CREATE DATABASE``, ``DROP
DATABASE`` and the like run from the server's ``postgres`` database (or ``template1``).

Apply (:mod:`.land`) runs the plan's schema statements again (the state file logs
each ``CREATE``/``ALTER``/``DROP``/... that ran in ``work``; a rollback cuts the log back to
its checkpoint) and writes the rows that differ between ``base`` and ``work`` into the
target in one transaction, after checking that nothing the plan changed was changed in the
target meanwhile; on a conflict or error nothing lands. Then ``base`` and ``work`` are
dropped; the checkpoint copies stay for diffs until the sandbox is discarded.

Modules, lowest first: :mod:`.state` (the state file), :mod:`.statements` (what SQL may
run), :mod:`.databases` and :mod:`.sandbox` (the sandbox class, one layer each),
:mod:`.strategy`; landing: :mod:`.catalog` (what is read of a database), :mod:`.land_plan`
(what differs between the copies), :mod:`.land_checks` (the target unchanged meanwhile),
:mod:`.land_write` (the rows written) and :mod:`.land` (one transaction of all that).
"""

from cleveragents_tui.sandbox.postgres_copy.sandbox import PostgresCopySandbox
from cleveragents_tui.sandbox.postgres_copy.state import STATE_FILE_NAME, is_copy_sandbox
from cleveragents_tui.sandbox.postgres_copy.strategy import (
    CopyUnavailableError,
    PostgresCopyStrategy,
)

__all__ = [
    "STATE_FILE_NAME",
    "CopyUnavailableError",
    "PostgresCopySandbox",
    "PostgresCopyStrategy",
    "is_copy_sandbox",
]
