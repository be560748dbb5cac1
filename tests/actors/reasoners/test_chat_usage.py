"""The chat reasoner reports each model call's tokens (LangChain's ``usage_metadata``)."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from cleveragents_tui.actors.reasoners.chat import FINISH_PHASE, ChatReasoner
from cleveragents_tui.actors.reasoners.usage import MetersUsage, ModelCall
from cleveragents_tui.domain.action import Action
from cleveragents_tui.domain.enums import Phase
from tests.actors.reasoners.test_chat import RecordingFakeChatModel, state

ACTION = Action(name="local/usage", prompt="Do it")


def finish(usage: dict[str, int] | None) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": FINISH_PHASE, "args": {}, "id": "c-1"}],
        usage_metadata=usage,
    )


def test_each_call_is_reported_once_with_its_tokens() -> None:
    usage = {"input_tokens": 700, "output_tokens": 50, "total_tokens": 750}
    reasoner = ChatReasoner(
        RecordingFakeChatModel(messages=iter([finish(usage), finish(None)])), ACTION
    )
    assert isinstance(reasoner, MetersUsage)
    assert reasoner.propose(state(), Phase.STRATEGIZE) is None
    assert reasoner.take_usage() == [ModelCall("recordingfakechatmodel", 700, 50)]
    assert reasoner.take_usage() == []  # taken once
    reasoner.propose(state(), Phase.STRATEGIZE)
    [unreported] = reasoner.take_usage()  # a provider that reports no usage counts 0
    assert unreported.tokens == 0


def test_a_reply_without_a_tool_call_is_a_second_call() -> None:
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    text = AIMessage(content="thinking aloud", usage_metadata=usage)
    reasoner = ChatReasoner(RecordingFakeChatModel(messages=iter([text, finish(usage)])), ACTION)
    reasoner.propose(state(), Phase.STRATEGIZE)
    assert [c.tokens for c in reasoner.take_usage()] == [15, 15]
