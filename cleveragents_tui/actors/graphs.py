"""The strategy and execution actors as LangGraph graphs (DESIGN.md sections 5 and 6).

Each actor is a one-node graph — ``decide`` loops until the phase is done — compiled with
``interrupt_before=["decide"]`` and run one step at a time with durability ``"sync"``. So
before every decision there is a checkpoint, and that checkpoint is the decision's
``actor_state_ref``: restoring it puts the actor back exactly where it made the decision.

Restoring checks the checkpoint exists under its thread first (a valid id under the wrong
thread silently returns an empty state, and ``update_state`` on a missing one makes an
orphan), then forks from it with ``update_state(..., as_node="decide")``: the old branch
stays in the thread's history, and the next run continues from the fork.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph

from cleveragents_tui.actors.base import ActorState
from cleveragents_tui.domain.decision import ActorStateRef
from cleveragents_tui.domain.enums import Phase
from cleveragents_tui.domain.errors import UserError

NODE = "decide"
ROLE = {Phase.STRATEGIZE: "strategy", Phase.EXECUTE: "execution"}

Step = Callable[[ActorState, ActorStateRef], dict[str, Any]]
"""Makes one decision from the state; returns the state update (``done`` ends the phase)."""


class ActorStateMissingError(UserError):
    """The LangGraph checkpoint a decision was made from cannot be found."""


def thread_id(plan_id: str, phase: Phase) -> str:
    return f"{plan_id}:{ROLE[phase]}"


def initial_state(plan_id: str, phase: Phase) -> ActorState:
    return ActorState(
        plan_id=plan_id, phase=phase.value, position=0, guidance=[], notes=[], done=False
    )


class Actor:
    """One plan's actor for one phase, persisted by ``checkpointer``."""

    def __init__(
        self, checkpointer: BaseCheckpointSaver[str], plan_id: str, phase: Phase, step: Step
    ) -> None:
        self.plan_id = plan_id
        self.phase = phase
        self._step = step
        self._ref: ActorStateRef | None = None
        builder: StateGraph[ActorState] = StateGraph(ActorState)
        builder.add_node(NODE, self._decide)
        builder.add_edge(START, NODE)
        builder.add_conditional_edges(NODE, lambda s: END if s["done"] else NODE)
        self.graph = builder.compile(checkpointer=checkpointer, interrupt_before=[NODE])
        self.config: RunnableConfig = {"configurable": {"thread_id": thread_id(plan_id, phase)}}

    def _decide(self, state: ActorState) -> dict[str, Any]:
        assert self._ref is not None, "the driver sets the checkpoint before each step"
        return self._step(state, self._ref)

    def state(self) -> ActorState | None:
        values = self.graph.get_state(self.config).values
        return cast(ActorState, dict(values)) if values else None

    def finished(self) -> bool:
        snapshot = self.graph.get_state(self.config)
        return bool(snapshot.values) and not snapshot.next

    def run(self, keep_going: Callable[[], bool]) -> bool:
        """Make decisions until the phase is done (True) or ``keep_going`` says stop (False).

        An exception from a step leaves the actor before that step; running again retries it.
        """
        if not self.graph.get_state(self.config).values:
            self.graph.invoke(
                initial_state(self.plan_id, self.phase), self.config, durability="sync"
            )
        while True:
            snapshot = self.graph.get_state(self.config)
            if not snapshot.next:
                return True
            if not keep_going():
                return False
            configurable = snapshot.config["configurable"]
            self._ref = ActorStateRef(
                thread_id=configurable["thread_id"],
                checkpoint_ns=configurable.get("checkpoint_ns", ""),
                checkpoint_id=configurable["checkpoint_id"],
                node=NODE,
                step=snapshot.metadata.get("step") if snapshot.metadata else None,
            )
            self.graph.invoke(None, self.config, durability="sync")

    def seed(self, update: dict[str, Any]) -> None:
        """Start a new actor with ``update`` in its first state (an appended plan's guidance)."""
        if self.graph.get_state(self.config).values:
            raise ActorStateMissingError(
                f"actor {self.config['configurable']['thread_id']} already started"
            )
        seeded = cast(ActorState, {**initial_state(self.plan_id, self.phase), **update})
        self.graph.invoke(seeded, self.config, durability="sync")

    def first_checkpoint(self) -> ActorStateRef | None:
        """The checkpoint before the actor's first decision (None if it never started)."""
        first = None
        for snapshot in self.graph.get_state_history(self.config):
            if snapshot.next == (NODE,):
                first = snapshot  # history runs newest to oldest: keep the last seen
        if first is None:
            return None
        configurable = first.config["configurable"]
        return ActorStateRef(
            thread_id=configurable["thread_id"],
            checkpoint_ns=configurable.get("checkpoint_ns", ""),
            checkpoint_id=configurable["checkpoint_id"],
            node=NODE,
            step=first.metadata.get("step") if first.metadata else None,
        )

    def load(self, ref: ActorStateRef) -> ActorState:
        """The state at ``ref``, checked to exist under its own thread."""
        if ref.thread_id != thread_id(self.plan_id, self.phase):
            raise ActorStateMissingError(
                f"actor state {ref.checkpoint_id} belongs to thread {ref.thread_id}, "
                f"not {thread_id(self.plan_id, self.phase)}",
                "restore it with the actor of its own plan and phase",
            )
        config: RunnableConfig = {
            "configurable": {
                "thread_id": ref.thread_id,
                "checkpoint_ns": ref.checkpoint_ns,
                "checkpoint_id": ref.checkpoint_id,
            }
        }
        snapshot = self.graph.get_state(config)
        found = (
            snapshot.config.get("configurable", {}).get("checkpoint_id")
            if snapshot.values
            else None
        )
        if found != ref.checkpoint_id or snapshot.created_at is None:
            raise ActorStateMissingError(
                f"actor state {ref.checkpoint_id} of thread {ref.thread_id} is missing",
                "the actor checkpoint database was changed or lost; correct with --mode=append",
            )
        return cast(ActorState, dict(snapshot.values))

    def fork(self, ref: ActorStateRef, update: dict[str, Any]) -> None:
        """Continue from ``ref`` with ``update`` applied; the old branch stays in history."""
        self.load(ref)
        config: RunnableConfig = {
            "configurable": {
                "thread_id": ref.thread_id,
                "checkpoint_ns": ref.checkpoint_ns,
                "checkpoint_id": ref.checkpoint_id,
            }
        }
        self.graph.update_state(config, {**update, "done": False}, as_node=NODE)
