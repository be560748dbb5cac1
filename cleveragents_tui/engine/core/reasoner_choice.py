"""Which reasoner a plan runs with — the scripted one or a chat model — chosen once, kept.

``agents plan use --reasoner chat --model PROVIDER:MODEL`` (or the settings
``core.reasoner``, ``core.model``, ``core.model-base-url``) picks a LangChain chat model,
built by LangChain's ``init_chat_model``. The choice is stored with the plan (a setting of
scope ``plan:<id>``: the model and the base URL, never a key), so ``plan run``/``resume``
and a correction's replay in a later process ask the same model; a child plan asks its
parent's. The plan's stored action names the chat actor, so a correction's preview does not
read a chat decision as one of the scripted reasoner's points.

Everything a person can fix — no LangChain, no provider package, no API key, an unknown
provider — is one :class:`UserError` naming it and how to fix it, raised before anything is
stored. LangChain is imported only when a chat model is built. See docs/reasoners.md.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cleveragents_tui.automation.precedence import GLOBAL_SCOPE, project_scope
from cleveragents_tui.domain.action import Action, ActorNames
from cleveragents_tui.domain.enums import Phase, PlanState
from cleveragents_tui.domain.errors import UserError
from cleveragents_tui.store.store import Store
from cleveragents_tui.store.unit_of_work import UnitOfWork

if TYPE_CHECKING:
    from cleveragents_tui.actors.base import Reasoner
    from cleveragents_tui.actors.tools import ToolRegistry

REASONER_KEY = "core.reasoner"
MODEL_KEY = "core.model"
BASE_URL_KEY = "core.model-base-url"
TIMEOUT_KEY = "core.model-timeout"
MAX_TIMEOUT = 86_400.0  # a day: longer is a typo, not a wait
SCRIPTED, CHAT = "scripted", "chat"
REASONERS = (SCRIPTED, CHAT)
CHAT_ACTOR = "local/chat"  # the actor name a chat plan's stored action carries

_MODEL = re.compile(r"^(?P<provider>[a-z][a-z0-9_-]*):(?P<name>\S+)$")
_EXAMPLE = "openai:gpt-4o-mini"
_INSTALL_ANY = "pip install 'cleveragents-tui[openai]' (or [anthropic], [ollama])"

ReasonerFactory = Callable[[Action, Callable[[], dict[str, str]]], "Reasoner"]


@dataclass(frozen=True)
class Provider:
    """What a provider needs: its LangChain package, the extra that installs it, its key."""

    module: str
    package: str
    extra: str
    key_env: str | None
    base_url_env: str | None
    tool_choice: str | None  # "any": the provider can be made to always call a tool


# The providers this project installs as extras. Any other provider init_chat_model knows
# (google_genai, mistralai, groq, …) works too; its package and key are checked by building
# the model, and its own error message is passed on.
PROVIDERS: dict[str, Provider] = {
    "openai": Provider(
        "langchain_openai", "langchain-openai", "openai", "OPENAI_API_KEY", "OPENAI_BASE_URL", "any"
    ),
    "anthropic": Provider(
        "langchain_anthropic",
        "langchain-anthropic",
        "anthropic",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "any",
    ),
    # Ollama needs no key; its client reads OLLAMA_HOST itself.
    "ollama": Provider("langchain_ollama", "langchain-ollama", "ollama", None, None, None),
}


@dataclass(frozen=True)
class ModelChoice:
    """A chat model as a plan keeps it: ``provider:name`` and the server's base URL."""

    model: str
    base_url: str | None = None

    @property
    def provider(self) -> str:
        return self.model.split(":", 1)[0]

    @property
    def name(self) -> str:
        """The model's own name, after ``provider:`` (``llama3:8b`` of ``ollama:llama3:8b``)."""
        return self.model.split(":", 1)[1]

    def as_json(self) -> dict[str, Any]:
        return {"reasoner": CHAT, "model": self.model, "base_url": self.base_url}


# -- checking -------------------------------------------------------------------------------


def parse_model(value: str) -> str:
    """``value`` if it is ``PROVIDER:MODEL``; else a UserError with an example."""
    if not _MODEL.match(value.strip()):
        raise UserError(
            f"model {value!r} is not PROVIDER:MODEL",
            f"name the provider and the model, for example {_EXAMPLE}",
        )
    return value.strip()


def check_reasoner(value: str) -> str:
    if value not in REASONERS:
        raise UserError(f"unknown reasoner {value!r}", f"use one of: {', '.join(REASONERS)}")
    return value


def check_base_url(value: str) -> str:
    if not re.match(r"^https?://\S+$", value.strip()):
        raise UserError(
            f"base URL {value!r} is not an http(s) URL",
            "give the server's URL, for example http://127.0.0.1:8000/v1",
        )
    return value.strip()


def check_timeout(value: str) -> str:
    """``core.model-timeout``: seconds above 0, at most a day, as it is stored."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_TIMEOUT:
        raise UserError(
            f"model timeout {value!r} is not a number of seconds above 0 and at most a day",
            "give the seconds a model's answer may take, for example 300",
        )
    return f"{seconds:g}"


def check_installed(model: str) -> None:
    """LangChain and the provider's package are importable (a provider of ours is checked
    here; any other when its model is built)."""
    provider = PROVIDERS.get(model.split(":", 1)[0])
    if importlib.util.find_spec("langchain") is None:
        extra = f"[{provider.extra}]" if provider else "[llm]"
        raise UserError(
            "the chat reasoner needs the langchain package, which is not installed",
            f"pip install 'cleveragents-tui{extra}'",
        )
    if provider is not None and importlib.util.find_spec(provider.module) is None:
        raise UserError(
            f"model {model} needs the package {provider.package}, which is not installed",
            f"pip install 'cleveragents-tui[{provider.extra}]'",
        )
    if provider is None:  # before a plan or a setting keeps it, not at its first call
        from langchain.chat_models import base

        names = getattr(base, "_BUILTIN_PROVIDERS", None)  # LangChain's own list, if it has one
        prefix = model.split(":", 1)[0]
        if names and prefix not in names:
            raise UserError(
                f"model {model}: LangChain has no provider {prefix!r}",
                f"name one it has ({', '.join(sorted(names))}); known here: {', '.join(PROVIDERS)}",
            )


def check_ready(choice: ModelChoice, env: Mapping[str, str] | None = None) -> None:
    """Everything the model needs to be called is there: packages, and its API key."""
    env = os.environ if env is None else env
    check_installed(choice.model)
    provider = PROVIDERS.get(choice.provider)
    if provider is not None and provider.key_env and not env.get(provider.key_env):
        where = (
            f" (any value works for a local server at {choice.base_url})" if choice.base_url else ""
        )
        raise UserError(
            f"model {choice.model} needs an API key: {provider.key_env} is not set",
            f"export {provider.key_env}=...{where}",
        )
    if provider is None:
        build_model(choice)  # its own checks: the package, the key, the provider's name


# -- choosing -------------------------------------------------------------------------------


def _setting(store: Store, key: str, project: str | None) -> str | None:
    scopes = ([project_scope(project)] if project else []) + [GLOBAL_SCOPE]
    with store.unit_of_work() as uow:
        for scope in scopes:
            value = uow.settings.get(scope, key)
            if isinstance(value, str) and value:
                return value
    return None


def choose(
    store: Store,
    action: Action,
    *,
    reasoner: str | None = None,
    model: str | None = None,
    project: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ModelChoice | None:
    """The chat model a new plan of ``action`` runs with; None: the scripted reasoner.

    The reasoner: ``reasoner``, else chat when ``model`` is given, else the action's actors
    (``local/chat``), else ``core.reasoner`` (project, then global), else scripted. The
    model: ``model``, else ``core.model``. The base URL: ``core.model-base-url``, else the
    provider's environment variable (``OPENAI_BASE_URL``). Checked as :func:`check_ready`.
    """
    env = os.environ if env is None else env
    project = project or action.project
    if reasoner is not None:
        kind = check_reasoner(reasoner)
    elif model is not None or CHAT_ACTOR in (action.actors.strategy, action.actors.execution):
        kind = CHAT
    else:
        kind = _setting(store, REASONER_KEY, project) or SCRIPTED
    if kind == SCRIPTED:
        if model is not None:
            raise UserError(
                "--model is for the chat reasoner", "add --reasoner chat, or leave out --model"
            )
        return None
    name = model or _setting(store, MODEL_KEY, project)
    if name is None:
        raise UserError(
            "the chat reasoner needs a model",
            f"add --model PROVIDER:MODEL (e.g. {_EXAMPLE}), or: agents config set {MODEL_KEY} {_EXAMPLE}",
        )
    name = parse_model(name)
    provider = PROVIDERS.get(name.split(":", 1)[0])
    base_url = _setting(store, BASE_URL_KEY, project) or (
        env.get(provider.base_url_env) if provider and provider.base_url_env else None
    )
    choice = ModelChoice(name, base_url or None)
    check_ready(choice, env)
    return choice


def chat_action(action: Action) -> Action:
    """``action`` with the chat actor in both phases, its child actions too."""
    actors = ActorNames(strategy=CHAT_ACTOR, execution=CHAT_ACTOR)
    return action.model_copy(
        update={"actors": actors, "subactions": tuple(chat_action(a) for a in action.subactions)}
    )


# -- keeping it with the plan ----------------------------------------------------------------


def plan_scope(plan_id: str) -> str:
    return f"plan:{plan_id}"


def keep_choice(uow: UnitOfWork, plan_id: str, choice: ModelChoice) -> None:
    """Store ``choice`` with the plan, in the unit of work that stores the plan's action."""
    uow.settings.set(plan_scope(plan_id), REASONER_KEY, choice.as_json())


def for_plan(store: Store, plan_id: str) -> ModelChoice | None:
    """The chat model ``plan_id`` (or the nearest parent that has one) runs with."""
    with store.unit_of_work() as uow:
        return kept_choice(uow, plan_id)


def kept_choice(uow: UnitOfWork, plan_id: str) -> ModelChoice | None:
    """The chat model the plan runs with: its own, else its nearest parent's; None: the
    scripted reasoner."""
    current: str | None = plan_id
    while current is not None:
        value = uow.settings.get(plan_scope(current), REASONER_KEY)
        if isinstance(value, Mapping) and value.get("reasoner") == CHAT:
            return ModelChoice(str(value["model"]), value.get("base_url") or None)
        current = uow.plans.get(current).parent_plan_id
    return None


def check_plan_model(store: Store, plan_id: str, *, replay: bool = False) -> None:
    """Before a run (or a correction's ``replay``): a plan whose actor will be asked needs
    its model ready — a later process may lack the key or the package. One line, before
    anything changes. A run that cannot reach an actor (a pending approval, a pause, the
    Apply phase) is not held up by a missing key."""
    choice = for_plan(store, plan_id)
    if choice is None:
        return
    with store.unit_of_work() as uow:
        plan = uow.plans.get(plan_id)
        pending = bool(uow.approvals.pending(plan_id))
    idle = (
        plan.state.is_terminal
        or plan.phase is Phase.APPLY
        or plan.state in (PlanState.COMPLETED, PlanState.PAUSED)
        or (plan.state is PlanState.AWAITING_APPROVAL and pending)
    )
    if idle and not replay:
        return
    try:
        check_ready(choice)
    except UserError as exc:
        raise UserError(f"plan {plan_id} runs with {choice.model}: {exc.problem}", exc.fix) from exc


# -- building -------------------------------------------------------------------------------


def model_timeout(store: Store, project: str | None) -> float | None:
    """``core.model-timeout`` (the project's, else the global one); None: the provider's."""
    value = _setting(store, TIMEOUT_KEY, project)
    return None if value is None else float(value)


def build_model(choice: ModelChoice, timeout: float | None = None) -> Any:
    """The LangChain chat model of ``choice`` (``init_chat_model``); errors as UserError.

    ``timeout``: the seconds each request may take. LangChain's integrations take it as
    ``timeout``, but Ollama's hands it to its HTTP client (``client_kwargs``)."""
    check_installed(choice.model)
    from langchain.chat_models import init_chat_model

    kwargs: dict[str, Any] = {}
    if choice.base_url:
        kwargs["base_url"] = choice.base_url
    if timeout is not None and choice.provider == "ollama":
        kwargs["client_kwargs"] = {"timeout": timeout}
    elif timeout is not None:
        kwargs["timeout"] = timeout
    try:
        # the provider as named, never guessed from the model's name (gemini-… is Vertex AI)
        return init_chat_model(choice.name, model_provider=choice.provider, **kwargs)
    except ImportError as exc:  # a provider outside PROVIDERS without its package
        raise UserError(
            f"model {choice.model} needs a package that is not installed ({exc.name or exc})",
            f"install the LangChain integration of {choice.provider!r}",
        ) from exc
    except Exception as exc:  # an unknown provider, a missing key: the provider's own words
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise UserError(
            f"model {choice.model} cannot be used: {first}",
            f"check the provider and its settings (known here: {', '.join(PROVIDERS)})",
        ) from exc


def factory(
    choice: ModelChoice, registry: ToolRegistry, store: Store, timeout: float | None = None
) -> ReasonerFactory:
    """A reasoner factory for the runner: the chat reasoner over ``choice``'s model, offered
    the tools of the action's skill set and told what each of its resources is."""
    model = build_model(choice, timeout)
    provider = PROVIDERS.get(choice.provider)

    def make(action: Action, chosen: Callable[[], dict[str, str]]) -> Reasoner:
        from cleveragents_tui.actors.reasoners.chat import ChatReasoner

        names = [t for t in action.skill_set if t in registry]
        return ChatReasoner(
            model,
            action,
            [registry.tool(t).spec for t in names],
            current_steps=chosen,
            tool_choice=provider.tool_choice if provider else None,
            arguments={t: registry.tool(t).parameters for t in names},
            resource_kinds=resource_kinds(store, action.resources),
        )

    return make


def resource_kinds(store: Store, resource_ids: tuple[str, ...]) -> dict[str, str]:
    """What each of the resources is (``git``, ``database``, ...), for the model: a name
    alone does not say which tools work on it."""
    with store.unit_of_work() as uow:
        registered = {r.resource_id: r for r in uow.resources.all()}
    return {r: registered[r].kind for r in resource_ids if r in registered}


def stored_factory(store: Store, plan_id: str, registry: ToolRegistry) -> ReasonerFactory | None:
    """The factory of the model ``plan_id`` keeps, with the ``core.model-timeout`` of this
    process's settings (a wait, not part of the plan); None: the scripted reasoner."""
    with store.unit_of_work() as uow:  # one read for the choice and the plan's project
        choice = kept_choice(uow, plan_id)
        project = uow.plans.get(plan_id).project
    if choice is None:
        return None
    return factory(choice, registry, store, model_timeout(store, project))
