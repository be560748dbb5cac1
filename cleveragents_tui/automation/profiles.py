"""Loading automation profiles from YAML, and the registry of built-in and custom profiles.

The eight built-in profiles ship as YAML under ``profiles/`` and are read once. Custom
profiles (``namespace/name``) are registered from a YAML file and stored in the database.

A profile file is read with ``yaml.safe_load`` semantics and more: tags that build Python
objects, anchors/aliases and duplicate keys are refused, and the mapping is validated by
:class:`AutomationProfile`. Every problem becomes one :class:`ProfileError` line naming the
file, the field and the fix, and nothing is registered.
"""

from __future__ import annotations

import difflib
import functools
import re
import reprlib
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from cleveragents_tui.domain.documents import (
    AutomationProfileDocument,
    AutomationProfileListDocument,
)
from cleveragents_tui.domain.errors import NotFoundError, UserError
from cleveragents_tui.domain.profile import (
    BUILTIN_PROFILE_NAMES,
    AutomationFlag,
    AutomationGuard,
    AutomationProfile,
    SafetyProfile,
    is_builtin_name,
)
from cleveragents_tui.resources import data_path
from cleveragents_tui.safe_yaml import NoAliasLoader
from cleveragents_tui.store.store import Store

MAX_FILE_BYTES = 256 * 1024
SCHEMA_FIX = "see docs/automation-profiles.md or profiles/examples/ for the profile format"
_THRESHOLD_FIX = "0.0 means always automatic, 1.0 always manual, in between: automatic when confidence >= threshold"
_FLAG_NAMES = frozenset(flag.value for flag in AutomationFlag)
_SUBMODELS: dict[str, type[BaseModel]] = {"safety": SafetyProfile, "guards": AutomationGuard}
_SHORT_REPR = reprlib.Repr()
_SHORT_REPR.maxstring = 40
_SHORT_REPR.maxother = 40
_SHORT_REPR.maxlist = 5
_SHORT_REPR.maxdict = 5
_SHORT_REPR.maxlevel = 2


class ProfileError(UserError):
    """A profile file or a registry request that cannot be honoured; nothing was changed."""


# Reading YAML --------------------------------------------------------------------------


class _ProfileLoader(NoAliasLoader):
    """``SafeLoader`` that also refuses anchors/aliases and duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key if isinstance(key, str | int | float | bool) else id(key))
        return super().construct_mapping(node, deep=deep)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _yaml_error(source: str, exc: yaml.YAMLError) -> ProfileError:
    mark = getattr(exc, "problem_mark", None)
    where = f"{source}: line {mark.line + 1}" if mark is not None else source
    problem = _one_line(str(getattr(exc, "problem", None) or exc))
    tag = re.search(r"constructor for the tag '([^']+)'", problem)
    if tag:
        shown = tag.group(1).replace("tag:yaml.org,2002:", "!!")
        return ProfileError(
            f"{where}: the YAML tag {shown} is not allowed",
            "profiles are plain YAML (mappings, lists, numbers, strings, true/false, null); "
            "remove the tag",
        )
    if problem.startswith("duplicate key"):
        return ProfileError(f"{where}: {problem}", "give each key once")
    if problem.startswith("anchors and aliases"):
        return ProfileError(f"{where}: {problem}", "write the value out in full")
    return ProfileError(
        f"{where}: not valid YAML ({problem})", "check the indentation and quoting near that line"
    )


def _got(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return _one_line(_SHORT_REPR.repr(value))


def _known_keys(loc: tuple[int | str, ...]) -> list[str]:
    model: type[BaseModel] = AutomationProfile
    if len(loc) > 1 and isinstance(loc[0], str) and loc[0] in _SUBMODELS:
        model = _SUBMODELS[loc[0]]
    return list(model.model_fields)


def _where(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        name = str(part) if str(part).isprintable() else repr(part)  # a key with a newline
        text += f"[{part}]" if isinstance(part, int) else (f".{name}" if text else name)
    return text or "profile"


def _explain(error: ErrorDetails) -> tuple[str, str]:
    """The message and the fix of one validation error."""
    loc = tuple(error["loc"])
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    field = str(loc[-1]) if loc else ""
    is_threshold = len(loc) == 1 and field in _FLAG_NAMES
    if kind == "missing":
        if is_threshold:
            return "is missing", f"give all 11 thresholds ({_THRESHOLD_FIX})"
        if field == "name":
            return "is missing", "name the profile namespace/name, e.g. local/my-profile"
        return "is missing", SCHEMA_FIX
    if kind == "extra_forbidden":
        known = _known_keys(loc)
        close = difflib.get_close_matches(field, known, n=1)
        hint = f"did you mean {close[0]}?" if close else f"known keys: {', '.join(known)}"
        return "unknown key", hint
    if is_threshold:
        return f"must be a number between 0.0 and 1.0 (got {_got(value)})", _THRESHOLD_FIX
    messages = {
        "bool_type": "must be true or false",
        "int_type": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_type": "must be a number",
        "finite_number": "must be a finite number (use null for no limit)",
        "string_type": "must be a string",
        "model_type": "must be a mapping of keys to values",
        "model_attributes_type": "must be a mapping of keys to values",
        "tuple_type": "must be a list",
        "greater_than_equal": f"must be >= {ctx.get('ge')}",
        "less_than_equal": f"must be <= {ctx.get('le')}",
    }
    if kind in messages:
        return f"{messages[kind]} (got {_got(value)})", SCHEMA_FIX
    message = str(error["msg"]).removeprefix("Value error, ")
    if loc == ("name",):
        return message, "custom profile names are namespace/name, e.g. local/my-profile"
    return message[:1].lower() + message[1:], SCHEMA_FIX


def _validation_error(source: str, exc: ValidationError) -> ProfileError:
    # An unknown key first: a misspelt threshold also shows up as a missing one, which is
    # then not counted as another problem.
    errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")
    meant = {
        (*e["loc"][:-1], match)
        for e in errors
        if e["type"] == "extra_forbidden"
        for match in difflib.get_close_matches(str(e["loc"][-1]), _known_keys(e["loc"]), n=1)
    }
    errors = [e for e in errors if not (e["type"] == "missing" and tuple(e["loc"]) in meant)]
    first = errors[0]
    message, fix = _explain(first)
    more = f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return ProfileError(
        f"{source}: {_where(tuple(first['loc']))}: {message}{more if len(errors) > 1 else ''}",
        fix,
    )


def parse_profile_yaml(text: str, source: str) -> AutomationProfile:
    """Parse and validate one profile; ``source`` names the file in error messages."""
    try:
        data = yaml.load(text, Loader=_ProfileLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise _yaml_error(source, exc) from None
    except ValueError as exc:  # a value YAML matched but cannot build: 2024-13-45, a huge int
        raise ProfileError(
            f"{source}: a value cannot be read ({_one_line(str(exc))})",
            "check the numbers and dates in the file",
        ) from None
    except RecursionError:
        raise ProfileError(f"{source}: nested too deeply to read", SCHEMA_FIX) from None
    if data is None:
        raise ProfileError(
            f"{source}: the file is empty",
            "a profile is a mapping with name, description, the 11 thresholds and safety; "
            + SCHEMA_FIX,
        )
    if not isinstance(data, dict):
        raise ProfileError(
            f"{source}: a profile must be a YAML mapping of keys to values, "
            f"not a {type(data).__name__}",
            SCHEMA_FIX,
        )
    for key in data:
        if not isinstance(key, str):
            raise ProfileError(f"{source}: key {_got(key)} is not a string", SCHEMA_FIX)
    try:
        return AutomationProfile.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(source, exc) from None


def load_profile_file(path: str | Path) -> AutomationProfile:
    """Read and validate the profile file at ``path`` (at most 256 KiB of UTF-8 YAML)."""
    source = str(path)
    file = Path(path)
    try:
        if not file.is_file():
            raise ProfileError(
                f"{source}: no such file" if not file.exists() else f"{source}: not a file",
                "give the path of a profile YAML file",
            )
        if file.stat().st_size > MAX_FILE_BYTES:
            raise ProfileError(
                f"{source}: the file is larger than {MAX_FILE_BYTES // 1024} KiB",
                "a profile is a short YAML mapping; check that this is the right file",
            )
        raw = file.read_bytes()
    except OSError as exc:
        raise ProfileError(
            f"{source}: cannot be read ({exc.strerror or exc})", "check the path and permissions"
        ) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ProfileError(f"{source}: is not UTF-8 text", "save the file as UTF-8") from None
    return parse_profile_yaml(text, source)


@functools.cache
def load_builtin_profiles() -> Mapping[str, AutomationProfile]:
    """The eight built-in profiles, by name, in the specification's order (read once)."""
    profiles: dict[str, AutomationProfile] = {}
    for name in BUILTIN_PROFILE_NAMES:
        path = data_path("profiles", f"{name}.yaml")
        profile = load_profile_file(path)
        if profile.name != name:
            raise ProfileError(
                f"{path}: names the profile {profile.name!r}, expected {name!r}",
                "the installation is damaged; reinstall cleveragents-tui",
            )
        profiles[name] = profile
    return MappingProxyType(profiles)


# Presenting ----------------------------------------------------------------------------

_PHASES = (
    ("Strategize", AutomationFlag.DECOMPOSE_TASK),
    ("Execute", AutomationFlag.CREATE_TOOL),
    ("Apply", AutomationFlag.SELECT_TOOL),
)


def threshold_mode(threshold: float, *, short: bool = False) -> str:
    """``automatic`` (0.0), ``manual`` (1.0) or ``confidence >= t``; short: ``auto``,
    ``manual``, ``≥t``."""
    if threshold <= 0.0:
        return "auto" if short else "automatic"
    if threshold >= 1.0:
        return "manual"
    return f"≥{threshold:g}" if short else f"confidence >= {threshold:g}"


def profile_summary(profile: AutomationProfile) -> str:
    """One line: how each phase is entered, then how many flags are automatic or manual.

    e.g. ``Strategize auto, Execute auto, Apply manual; 7 automatic, 0 by confidence, 4 manual``,
    then the guards set, by name (``; guards: require_approval_for_writes``).
    """
    phases = ", ".join(
        f"{phase} {threshold_mode(profile.threshold(flag), short=True)}" for phase, flag in _PHASES
    )
    guards = profile.guards.model_dump(exclude_defaults=True) if profile.guards else {}
    return (
        f"{phases}; {len(profile.automatic_flags())} automatic, "
        f"{len(profile.confidence_flags())} by confidence, {len(profile.manual_flags())} manual"
        + (f"; guards: {', '.join(guards)}" if guards else "")
    )


_GUARDS_TEMPLATE = """\
# guards:                      # calls that wait for a person (docs/automation-profiles.md)
#   tool_denylist: [local/run-command]     # these tools: every call
#   tool_allowlist: [local/read-file]      # only these run without asking
#   require_approval_for_writes: true      # every call that writes
#   max_tool_calls_per_step: 20            # calls past it, in one step
#   max_total_cost: 1.0                    # calls once the plan's cost reaches it
"""


def profile_file_text(profile: AutomationProfile, name: str) -> str:
    """``profile`` as a file ``agents automation-profile add --config`` takes, named ``name``
    (a built-in cannot be shadowed): the way to start a custom profile from one that is
    close, rather than writing all eleven thresholds by hand. Checked as ``add`` checks it."""
    if is_builtin_name(name):
        raise ProfileError(
            f"{name} is a built-in automation profile: built-in profiles cannot be shadowed",
            f"name yours namespace/name with --name, e.g. local/{name}",
        )
    renamed = profile.model_copy(update={"name": name})
    data = renamed.model_dump(mode="json", exclude_none=True)
    if renamed.guards is not None:
        data["guards"] = renamed.guards.model_dump(mode="json", exclude_none=True)
    text = (
        f"# from automation profile {profile.name}: edit it, then\n"
        f"#   agents automation-profile add --config FILE\n"
        + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        + ("" if renamed.guards is not None else _GUARDS_TEMPLATE)
    )
    parse_profile_yaml(text, f"the profile {name}")  # the name and every value as add takes them
    return text


def profile_kind(profile: AutomationProfile) -> str:
    return "built-in" if profile.is_builtin else "custom"


def profile_object(profile: AutomationProfile) -> dict[str, Any]:
    """The profile object of the ``cleveragents.automation-profile*/1`` JSON documents."""
    return {
        "name": profile.name,
        "kind": profile_kind(profile),
        "description": profile.description,
        "summary": profile_summary(profile),
        "thresholds": {flag.value: value for flag, value in profile.thresholds().items()},
        "safety": profile.safety.model_dump(mode="json"),
        "guards": None if profile.guards is None else profile.guards.model_dump(mode="json"),
    }


def profile_document(profile: AutomationProfile, result: str | None = None) -> dict[str, Any]:
    """``cleveragents.automation-profile/1``; ``result`` (added/replaced/removed) when set."""
    return AutomationProfileDocument(profile=profile_object(profile), result=result).dump()


def profile_list_document(profiles: list[AutomationProfile]) -> dict[str, Any]:
    """``cleveragents.automation-profile-list/1``: built-ins first, then custom by name."""
    return AutomationProfileListDocument(profiles=[profile_object(p) for p in profiles]).dump()


# The registry --------------------------------------------------------------------------


class ProfileRegistry:
    """Built-in profiles (read-only, no namespace) and custom profiles (``namespace/name``)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @staticmethod
    def builtins() -> Mapping[str, AutomationProfile]:
        return load_builtin_profiles()

    def names(self) -> list[str]:
        with self._store.unit_of_work() as uow:
            custom = uow.automation_profiles.names()
        return [*BUILTIN_PROFILE_NAMES, *custom]

    def get(self, name: str) -> AutomationProfile:
        """The profile called ``name``; an unknown name raises :class:`NotFoundError`."""
        builtin = self.builtins().get(name)
        if builtin is not None:
            return builtin
        with self._store.unit_of_work() as uow:
            profile = uow.automation_profiles.get(name)
        if profile is None:
            raise self._not_found(name)
        return profile

    def all(self) -> list[AutomationProfile]:
        """Every profile: the built-ins in the specification's order, then custom by name."""
        with self._store.unit_of_work() as uow:
            custom = uow.automation_profiles.all()
        return [*self.builtins().values(), *custom]

    def add(
        self, profile: AutomationProfile, *, replace: bool = False, source: str | None = None
    ) -> bool:
        """Register a custom profile; True when it replaced one of the same name.

        Built-in names cannot be shadowed; an existing name needs ``replace=True`` and no
        unfinished plan using it (a plan's profile is locked when the plan is created).
        ``source`` (the file the profile came from) prefixes the messages about its name.
        """
        where = f"{source}: name: " if source else ""
        if is_builtin_name(profile.name):
            raise ProfileError(
                f"{where}{profile.name} is a built-in automation profile: built-in profiles "
                "cannot be shadowed",
                f"name yours namespace/name, e.g. local/{profile.name}",
            )
        if "/" not in profile.name:  # pragma: no cover - the model refuses these already
            raise ProfileError(
                f"{where}{profile.name!r} has no namespace",
                "custom profile names are namespace/name",
            )
        with self._store.unit_of_work(write=True) as uow:
            repository = uow.automation_profiles
            exists = repository.exists(profile.name)
            if exists and not replace:
                raise ProfileError(
                    f"automation profile {profile.name} already exists",
                    "pass --replace to overwrite it, or choose another name",
                )
            if exists:
                users = repository.unfinished_plans_using(profile.name)
                if users:  # their profile is locked: replacing it would change them mid-run
                    raise ProfileError(
                        f"automation profile {profile.name} is locked to {len(users)} unfinished "
                        f"plan{'s' if len(users) > 1 else ''} ({', '.join(users[:3])})",
                        "apply or cancel them first, or add the new version under another name",
                    )
                repository.replace(profile)
            else:
                repository.add(profile)
            uow.commit()
        return exists

    def remove(self, name: str) -> AutomationProfile:
        """Remove a custom profile and return it.

        Built-ins cannot be removed, nor a profile that a plan not yet applied or cancelled
        uses (its behaviour would be lost mid-run).
        """
        if is_builtin_name(name):
            raise ProfileError(
                f"{name} is a built-in automation profile and cannot be removed",
                "only custom (namespace/name) profiles can be removed",
            )
        with self._store.unit_of_work(write=True) as uow:
            repository = uow.automation_profiles
            profile = repository.get(name)
            if profile is None:
                raise self._not_found(name)
            users = repository.unfinished_plans_using(name)
            if users:
                shown = ", ".join(users[:3]) + (" ..." if len(users) > 3 else "")
                raise ProfileError(
                    f"automation profile {name} is used by {len(users)} unfinished "
                    f"plan{'s' if len(users) > 1 else ''} ({shown})",
                    "apply or cancel them first",
                )
            repository.remove(name)
            uow.commit()
        return profile

    def _not_found(self, name: str) -> NotFoundError:
        known = self.names()
        shown = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20 else "")
        return NotFoundError(
            f"no automation profile named {name!r}",
            f"known profiles: {shown} (`agents automation-profile list`)",
        )
