"""A loopback server speaking the OpenAI chat-completions protocol, for driving
Hermes' real agent loop (``run_agent.AIAgent``) without a model.

A remote model cannot run here; everything else in such a test is real: the
agent loop, tool dispatch, the plugin's tools and Hermes' state.db.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fakes import reply_json

#: What a responder returns for one request: ``{"content": "text"}`` for a
#: final answer, or ``{"tool_calls": [(tool name, arguments dict), ...]}``.
Step = dict[str, Any]


class FakeChat:
    """``POST /v1/chat/completions`` on 127.0.0.1, answered by ``respond(body)``.

    Streams Server-Sent Events when the request asks for ``stream: true`` (the
    agent loop does), else answers one JSON completion. ``GET /v1/models``
    lists the model with a context length, so Hermes needs no other probe.
    Every request body is kept in ``requests``.
    """

    def __init__(self, respond: Callable[[dict[str, Any]], Step], *, model: str = "stub-model",
                 context_length: int = 200_000) -> None:
        self.respond, self.model, self.context_length = respond, model, context_length
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.closed = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self.reply(200, {"object": "list", "data": [
                        {"id": fake.model, "object": "model", "owned_by": "test",
                         "context_length": fake.context_length}]})
                else:
                    self.reply(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self.reply(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                with fake._lock:
                    fake.requests.append(body)
                try:
                    step = fake.respond(body)
                except Exception as exc:  # surface script errors in the test, not as a hang
                    fake.errors.append(repr(exc))
                    self.reply(500, {"error": {"message": repr(exc), "type": "server_error"}})
                    return
                message, finish = fake.message(step)
                if body.get("stream"):
                    self.stream(message, finish)
                else:
                    self.reply(200, {
                        "id": f"chatcmpl-{next(fake._ids)}", "object": "chat.completion",
                        "created": int(time.time()), "model": fake.model,
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    })

            def stream(self, message: dict[str, Any], finish: str) -> None:
                cid, created = f"chatcmpl-{next(fake._ids)}", int(time.time())

                def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> bytes:
                    data = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": fake.model,
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra}
                    return f"data: {json.dumps(data)}\n\n".encode()

                parts = [chunk({"role": "assistant", "content": ""})]
                if message.get("content"):
                    parts.append(chunk({"content": message["content"]}))
                for i, call in enumerate(message.get("tool_calls") or ()):
                    parts.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                                         "function": {"name": call["function"]["name"], "arguments": ""}}]}))
                    parts.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": call["function"]["arguments"]}}]}))
                parts.append(chunk({}, finish, usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}))
                parts.append(b"data: [DONE]\n\n")
                payload = b"".join(parts)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def reply(self, code: int, body: dict[str, Any]) -> None:
                reply_json(self, code, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # A short poll: shutdown() waits for the loop to notice, up to one poll (0.5 s by default, after every test).
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def message(self, step: Step) -> tuple[dict[str, Any], str]:
        if step.get("tool_calls"):
            calls = [{"id": f"call_{next(self._ids)}", "type": "function",
                      "function": {"name": name, "arguments": json.dumps(args)}}
                     for name, args in step["tool_calls"]]
            return {"role": "assistant", "content": step.get("content"), "tool_calls": calls}, "tool_calls"
        return {"role": "assistant", "content": step.get("content") or ""}, "stop"

    def close(self) -> None:
        """Stop listening; safe to call twice."""
        if not self.closed:
            self.closed = True
            self.server.shutdown()
            self.server.server_close()
