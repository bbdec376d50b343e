"""A loopback server speaking the OpenAI embeddings protocol (the one fake we
allow: a remote embedding API cannot run here)."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


def reply_json(handler: BaseHTTPRequestHandler, code: int, body: dict) -> None:
    """Answer a request with ``body`` as JSON (shared by the loopback fakes)."""
    payload = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload)


class FakeEmbeddings:
    """``POST /v1/embeddings`` on 127.0.0.1: deterministic vectors, counts requests.

    ``fail``: answer 503 to that many requests first. ``odd``: answer that many
    requests next with vectors of another size (``dims + 4``). ``resize``: ``(n, size)``,
    every answer after the first ``n`` requests of that size (a model changed). ``delay``: seconds before
    each answer. ``refuse``: answer every request 401 and, like some proxies,
    echo the ``Authorization`` header it got in the error text. ``words``:
    a bag of hashed words instead of a random vector per text, so texts that
    share words are similar (a stand-in for a real model's neighbourhoods).
    ``body``: when set, every answer is 200 with these bytes as its JSON body (a proxy's page, a broken server).
    """

    def __init__(
        self, *, dims: int = 8, b64: bool = False, fail: int = 0, delay: float = 0.0, refuse: bool = False, words: bool = False
    ) -> None:
        self.dims, self.b64, self.fail, self.delay, self.refuse, self.words = dims, b64, fail, delay, refuse, words
        self.odd = 0
        self.body: bytes | None = None
        self.resize: tuple[int, int] | None = None
        self.closed = False
        self.requests: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                if fake.delay:
                    threading.Event().wait(fake.delay)
                if fake.refuse:
                    self.reply(401, {"error": {"message": f"Incorrect API key provided: {self.headers.get('Authorization')}",
                                               "type": "invalid_request_error", "code": "invalid_api_key"}})
                    return
                if fake.body is not None:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(fake.body)))
                    self.end_headers()
                    self.wfile.write(fake.body)
                    return
                if fake.fail > 0:
                    fake.fail -= 1
                    self.send_response(503)
                    self.end_headers()
                    return
                data = []
                if fake.resize is not None and len(fake.requests) > fake.resize[0]:
                    fake.dims = fake.resize[1]
                width = fake.dims + 4 if fake.odd > 0 else fake.dims
                fake.odd -= fake.odd > 0
                for i, text in enumerate(body["input"]):
                    vec = fake.vector(text, width)
                    emb = base64.b64encode(vec.astype("<f4").tobytes()).decode() if fake.b64 else vec.tolist()
                    data.append({"object": "embedding", "index": i, "embedding": emb})
                self.reply(200, {"object": "list", "data": data, "model": body["model"],
                                 "usage": {"prompt_tokens": 1, "total_tokens": 1}})

            def reply(self, code: int, body: dict) -> None:
                reply_json(self, code, body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll: shutdown() waits for the loop to notice, up to one poll (0.5 s by default, after every test).
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def vector(self, text: str, dims: int | None = None) -> np.ndarray:
        dims = dims or self.dims
        if self.words:
            vec = np.zeros(dims, dtype=np.float32)
            for word in text.lower().split():
                vec[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dims] += 1.0
            return vec
        # hashlib, not hash(): the same vector in every run, whatever PYTHONHASHSEED says.
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big"))
        return rng.standard_normal(dims).astype(np.float32)

    def close(self) -> None:
        """Stop listening (the port then refuses connections); safe to call twice."""
        if not self.closed:
            self.closed = True
            self.server.shutdown()
            self.server.server_close()
