"""The test server answers the real ``ChatOpenAI`` client: tool calls, text, usage, errors."""

from __future__ import annotations

import pytest

pytest.importorskip("langchain_openai")

from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

from tests.support.openai_server import (
    API_KEY,
    OpenAIServer,
    Usage,
    finish_phase,
    http_error,
    record_decision,
    text,
)
from tests.support.openai_server import openai_server as openai_server  # the fixture

SCHEMA = {
    "type": "function",
    "function": {"name": "record_decision", "parameters": {"type": "object", "properties": {}}},
}


def _model(server: OpenAIServer, **kwargs: object) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini", base_url=server.base_url, api_key=API_KEY, max_retries=0, **kwargs
    )


def test_a_tool_call_and_its_usage_reach_chat_openai(openai_server: OpenAIServer) -> None:
    openai_server.add(
        record_decision(key="approach", confidence=0.9, content="thinking", usage=Usage(321, 45))
    )
    reply = _model(openai_server).bind_tools([SCHEMA]).invoke([HumanMessage("decide")])

    assert reply.tool_calls[0]["name"] == "record_decision"
    assert reply.tool_calls[0]["args"] == {"key": "approach", "confidence": 0.9}
    assert reply.text == "thinking"
    assert reply.usage_metadata is not None
    assert (reply.usage_metadata["input_tokens"], reply.usage_metadata["output_tokens"]) == (
        321,
        45,
    )
    (request,) = openai_server.completions
    assert request.authorization == f"Bearer {API_KEY}"
    assert request.body["model"] == "gpt-4o-mini"
    assert request.tool_names == ["record_decision"]
    assert "decide" in request.text


def test_streaming_answers_the_same_reply_and_usage(openai_server: OpenAIServer) -> None:
    openai_server.add(finish_phase(usage=Usage(7, 3)))
    model = _model(openai_server, streaming=True, stream_usage=True).bind_tools([SCHEMA])

    reply = model.invoke([HumanMessage("go on")])

    assert [c["name"] for c in reply.tool_calls] == ["finish_phase"]
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["total_tokens"] == 10


def test_a_responder_answers_what_it_was_sent(openai_server: OpenAIServer) -> None:
    openai_server.add(lambda request: text("yes" if "guidance" in request.text else "no"))

    assert _model(openai_server).invoke([HumanMessage("some guidance")]).text == "yes"


def test_errors_and_an_empty_script_reach_the_client(openai_server: OpenAIServer) -> None:
    openai_server.add(http_error(401, "bad key"))
    with pytest.raises(Exception, match="bad key"):
        _model(openai_server).invoke([HumanMessage("x")])
    with pytest.raises(Exception, match="no scripted reply left"):
        _model(openai_server).invoke([HumanMessage("x")])
    assert len(openai_server.completions) == 2
