"""Names vulture reports as unused that are used, by a framework or by name (``nox -s lint``).

Each entry says who uses it. Decorated callbacks (click commands, pydantic validators,
Textual ``@on`` handlers, SQLAlchemy event listeners) and the naming conventions of Textual
(``on_*``, ``action_*``, ``compose``) and Alembic are ignored in ``[tool.vulture]`` of
pyproject.toml. Add an entry here only with the reason; delete code that nothing uses.
"""

# ruff: noqa: B018, F821
# mypy: ignore-errors

# -- frameworks set or read these attributes -------------------------------------------------
_.model_config  # pydantic: each model's configuration
_.obj  # click: the command context's object (ctx.obj), read by pass_cli
_.maxstring, _.maxother, _.maxlist, _.maxdict, _.maxlevel  # reprlib.Repr limits
_.impl, _.cache_ok  # SQLAlchemy TypeDecorator (store/types.py)
_.process_bind_param, _.process_result_value  # SQLAlchemy TypeDecorator hooks
_.isolation_level, _.read_only, _.autocommit  # DB-API / psycopg connection settings
_.markup, _.sub_title, _.show_root, _.guide_depth  # Textual App/Screen/Tree attributes
_.highlighted  # Textual OptionList: the option under the cursor (tui/modals/pick.py sets it)
_.discover  # Textual command palette Provider hook (tui/commands.py)
_._on_tree_node_expanded, _._on_tree_node_selected  # Textual message handlers by name
_.get_content_width, _.get_content_height, _.render_line  # Textual layout, line API (long_text)
container, viewport  # their parameters: Textual passes them, LongText measures by its lines
_.format_commands  # click: Group.format_commands, the --help command list (cli/__init__.py)
_.msg, _.exc_text, _.stack_info  # logging.LogRecord fields a filter rewrites (web/log_lines.py)
_._open_app_process, _._stdin  # textual-serve's AppSession calls and writes these (web/sessions.py)
down_revision, branch_labels  # Alembic reads each migration module's globals
__getattr__  # PEP 562: engine/__init__.py loads a public name on first use

# -- read by name, not by attribute -----------------------------------------------------------
# The eleven thresholds: AutomationProfile.threshold() reads them with getattr.
_.decompose_task, _.create_tool, _.select_tool, _.edit_code, _.execute_command
_.create_file, _.delete_content, _.access_network, _.install_dependency
_.modify_config, _.approve_plan, _.APPROVE_PLAN
# Sandbox strategies are imported by name (engine/core/sandboxes.py, _STRATEGIES).
DatabaseStrategy, FilesystemCopyStrategy, GitWorktreeStrategy, NoneStrategy, OverlayStrategy
_.DISCARD  # OutsideChoice: parsed from --outside-changes=discard by value
_.automation_profiles  # UnitOfWork repository, used through AutomationProfileRepository too

# -- part of a documented result or model that interfaces and tests read ----------------------
_.requires_approval  # GuardResult: the specification's check_guard result field
_.guidance_used  # Proposal: the guidance a re-made choice follows (reasoners set it)
_.applies_on_its_own  # AppendImpact: whether an appended plan gets its own Apply
_.old_files  # ResourceRollback: kept in the correction's stored report (model_dump)
_.cancel_requested, _.plain_text  # TUI state read by the app's tests through the widgets

# -- test hooks kept in the package on purpose ------------------------------------------------
_.hits  # failpoints.hits(): the crash loops count how often a failpoint was reached
_.open_ids  # PlanSandboxes.open_ids(): test fixtures close every sandbox they opened
_.outcome_of  # RollbackReport.outcome_of(): one resource's outcome, for reports and tests
_.savepoints_held  # transaction_rollback: the savepoints a test expects to be held
_.row_count  # DecisionTree (widget): rows shown, read by the app's tests and benchmark
_.stored_size  # ObjectStore: bytes an object takes on disk, for the bytes-per-checkpoint bench

# -- OPEN: called by tests only; each needs an interface or to go (issue 15 report) ----------
_.child_plans  # engine/core/impact.py: Impact's child plans by outcome; only tests read it
_.rollback_to_decision  # engine/core/rollback.py: corrections call rollback_targets/rollback_to

# -- the printed JSON documents (domain/documents.py) -----------------------------------------
# Fields set by keyword where a document is built and printed by model_dump.
_.reverted_by, _.app_database, _.from_, _.to, _.repaired_groups, _.repaired_corrections
_.repaired_plans, _.finished_applies, _.discarded, _.bytes_freed
_.finished_plans_with_sandboxes
# Read by tests/domain/test_documents.py, which checks every field against docs/.
_.DOC_PAGE, _.DOCUMENTED_AS, DOCUMENTS
