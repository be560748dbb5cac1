"""A small OpenAI-compatible chat server on 127.0.0.1 with scripted replies, for tests.

The real client stack (``langchain-openai``'s ``ChatOpenAI``, the ``openai`` package, HTTP)
talks to it exactly as to the real service: point ``OPENAI_BASE_URL`` at
:attr:`OpenAIServer.base_url` and set any ``OPENAI_API_KEY``. Each ``POST
/v1/chat/completions`` takes the next scripted :class:`Reply` — a tool call
(``record_decision``, ``finish_phase``, …), plain text, or an HTTP error — and answers it
with the ``usage`` figures the reply carries. A reply may also be a function of the request
(:data:`Responder`), to answer what the model was sent. Every request is recorded
(:attr:`OpenAIServer.requests`), so a test can check what reached the model.

No scripted reply left: the server answers 500 with a message saying so, and the
client's error names it — a test never hangs on it. Streaming (``"stream": true``) is
answered as server-sent events: one chunk with the whole message, one with the usage when
``stream_options.include_usage`` asks for it, then ``[DONE]``.

Use it as a context manager or through the :func:`openai_server` fixture::

    with OpenAIServer([record_decision(key="approach", ...), finish_phase()]) as server:
        env = {**os.environ, **server.env()}
        ...
        assert "CORRECTION FROM THE USER" in server.requests[-1].text
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

HELD_SECONDS = 120  # a bound on a held answer's wait (held): never reached in a passing run
API_KEY = "sk-test-local"  # what env() sets; the server accepts any key and records it


@dataclass(frozen=True)
class Usage:
    """The token figures a reply reports (OpenAI's ``usage`` object)."""

    prompt_tokens: int = 100
    completion_tokens: int = 20

    def as_json(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


@dataclass(frozen=True)
class ToolCall:
    """One function call in a reply; ``arguments`` is sent as JSON text (or as given, when
    it is already a string — to send arguments that are not valid JSON)."""

    name: str
    arguments: Mapping[str, Any] | str = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """One scripted answer: text, tool calls, or an HTTP error (``status`` ≠ 200)."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    status: int = 200
    error: str = ""
    code: str | None = None  # the error's ``type`` and ``code`` (``insufficient_quota``)


@dataclass(frozen=True)
class Request:
    """A request the server got: its path, Authorization header and JSON body."""

    path: str
    authorization: str | None
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def text(self) -> str:
        """Every message's text, joined: what the model was told."""
        parts = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):  # content blocks
                parts.extend(str(b.get("text", "")) for b in content if isinstance(b, dict))
        return "\n".join(parts)

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools bound for this call."""
        return [t.get("function", {}).get("name") for t in self.body.get("tools", [])]


Responder = Callable[[Request], Reply]
"""A reply computed from the request it answers."""


def tool_call(
    name: str,
    arguments: Mapping[str, Any] | str | None = None,
    *,
    content: str | None = None,
    usage: Usage = Usage(),
) -> Reply:
    """A reply calling ``name`` with ``arguments``; ``content`` is the text beside it."""
    return Reply(content=content, tool_calls=(ToolCall(name, arguments or {}),), usage=usage)


def record_decision(*, content: str | None = None, usage: Usage = Usage(), **fields: Any) -> Reply:
    """A reply calling the chat reasoner's ``record_decision`` with ``fields``."""
    return tool_call("record_decision", fields, content=content, usage=usage)


def finish_phase(*, usage: Usage = Usage()) -> Reply:
    """A reply calling the chat reasoner's ``finish_phase``."""
    return tool_call("finish_phase", {}, usage=usage)


def text(content: str, *, usage: Usage = Usage()) -> Reply:
    """A reply with text only (no tool call)."""
    return Reply(content=content, usage=usage)


def held(reply: Reply, asked: threading.Event, release: threading.Event) -> Responder:
    """``reply`` once the test sets ``release`` (``asked`` is set when the request comes):
    the test acts while the model's answer is under way. A release that never comes is
    answered with an error after a bound, never a hang."""

    def answer(_request: Request) -> Reply:
        asked.set()
        if not release.wait(HELD_SECONDS):
            return http_error(400, "the test never released the answer")
        return reply

    return answer


def http_error(status: int, message: str, code: str | None = None) -> Reply:
    """An error answer in OpenAI's format (401 bad key, 429 rate limit, 500 …); ``code``
    as OpenAI names some (429 ``insufficient_quota``: the account's credit is spent)."""
    return Reply(status=status, error=message, code=code)


class _QuietServer(ThreadingHTTPServer):
    """A client that hung up before its answer (it timed out) is no error of the server's."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class OpenAIServer:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 (a free port), in a thread.

    Replies are taken in order; :meth:`add` queues more. :attr:`requests` holds every
    request answered (or refused), oldest first.
    """

    def __init__(self, replies: Iterable[Reply | Responder] = ()) -> None:
        self._lock = threading.Lock()
        self._replies: list[Reply | Responder] = list(replies)
        self._ids = itertools.count(1)
        self.requests: list[Request] = []
        self._http = _QuietServer(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> OpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests use -----------------------------------------------------------------

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        assert isinstance(host, str)  # an AF_INET server's address: (host, port)
        return f"http://{host}:{port}/v1"

    def env(self) -> dict[str, str]:
        """The environment that points an OpenAI client here."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": API_KEY}

    def add(self, *replies: Reply | Responder) -> None:
        """Queue more replies, answered after those already queued."""
        with self._lock:
            self._replies.extend(replies)

    def drop_pending(self) -> None:
        """Drop the queued replies no request has taken."""
        with self._lock:
            self._replies.clear()

    @property
    def pending(self) -> int:
        """How many queued replies no request has taken yet."""
        with self._lock:
            return len(self._replies)

    @property
    def completions(self) -> list[Request]:
        """The ``/chat/completions`` requests, oldest first."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # -- serving ------------------------------------------------------------------------

    def _next(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            if not self._replies:
                return http_error(
                    500,
                    f"the test server has no scripted reply left (request {len(self.requests)})",
                )
            reply = self._replies.pop(0)
        return reply(request) if callable(reply) else reply

    def _completion(self, reply: Reply, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{next(self._ids)}",
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": call.arguments
                        if isinstance(call.arguments, str)
                        else json.dumps(call.arguments),
                    },
                }
                for call in reply.tool_calls
            ]
        return {
            "id": f"chatcmpl-{next(self._ids)}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": reply.usage.as_json(),
        }

    def _chunks(self, completion: dict[str, Any], include_usage: bool) -> Iterator[dict[str, Any]]:
        """The completion as stream chunks: the whole message in one delta, then the usage."""
        choice = completion["choices"][0]
        delta = dict(choice["message"])
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
        head = {k: completion[k] for k in ("id", "created", "model")}
        yield {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}],
        }
        if include_usage:
            yield {
                **head,
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": completion["usage"],
            }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                return

            def _send_json(self, status: int, document: Mapping[str, Any]) -> None:
                data = json.dumps(document).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._send_json(200, {"object": "list", "data": []})
                else:
                    self._send_json(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    self._send_json(400, {"error": {"message": "the body is not JSON"}})
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                request = Request(self.path, self.headers.get("Authorization"), body)
                reply = server._next(request)
                if reply.status != 200:
                    kind = reply.code or "test_server_error"
                    error = {"message": reply.error, "type": kind, "code": reply.code}
                    self._send_json(reply.status, {"error": error})
                    return
                completion = server._completion(reply, str(body.get("model", "")))
                if not body.get("stream"):
                    self._send_json(200, completion)
                    return
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for chunk in server._chunks(completion, include_usage):
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")

        return Handler


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started :class:`OpenAIServer` with no replies queued (``server.add(...)`` them)."""
    with OpenAIServer() as server:
        yield server
