"""A folder of the project named in a question weighs half in the vector searched (``query.vector_queries``).

One explicit project with a git folder per app, the real local model, every
message indexed. The question names the API's folder; the session that answers
it never writes that name, while a dashboard session writes it three times
about something else. Embedded whole, the name pulls the vector to the
dashboard session; with the name in half of the vector, the answer leads.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest
from conftest import World, local_semantic, result_sessions

QUESTION = "What database does the ecommerce-api use?"


@pytest.fixture
def apps(world: World, local_model) -> Iterator[World]:
    api, dash = world.repo("shop/ecommerce-api"), world.repo("shop/dashboard-app")
    world.project("shop", [api, dash])
    world.session("api_db", api, messages=[
        ("user", "Where should orders and customers be stored?"),
        ("assistant", "The database for orders and customers is PostgreSQL 15.")])
    world.session("dash_calls", dash, messages=[
        ("assistant", "The dashboard-app calls the ecommerce-api for revenue; when the ecommerce-api is slow we cache "
                      "the ecommerce-api response for a minute.")])
    world.session("dash_theme", dash, messages=[("assistant", "The charts use the dark theme with a teal accent.")])
    world.session("cur", api, style="cli", messages=[("user", "let's continue")])
    yield from local_semantic(world, "cur", local_model)


def test_the_answer_leads_when_the_question_names_a_folder(apps: World):
    answer = apps.search("cur", QUESTION, mode="semantic")
    assert answer["semantic_status"] == "ready", answer
    assert result_sessions(answer)[:1] == ["api_db"], answer["results"]
    # Embedded whole, the question's nearest session is the one that writes the folder's name.
    leg = importlib.import_module("hermes_plugins.project_history_recall.vector_leg")
    original = leg.vector_queries
    leg.vector_queries = lambda text, folders: (text,)
    try:
        assert result_sessions(apps.search("cur", QUESTION, mode="semantic"))[:1] == ["dash_calls"]
    finally:
        leg.vector_queries = original


def remote_embedder(world: World, fake):
    """A loopback OpenAI-compatible embedder configured and consented to from session ``cur``; returns it (its
    ``requests`` hold what was sent)."""
    server = fake(dims=16, words=True)
    world.configure_embedding(provider="openai", base_url=server.base_url, model="m")
    assert world.call("project_history_semantic_consent", {"decision": "allow", "projects": "all"}, "cur")["success"]
    return server


def test_leaving_a_name_out_never_uncovers_a_secret(world: World, fake):
    """With a remote embedder, a credential written around a folder's name (a database user named after the
    app) is never sent, in either text: only a name standing alone is left out, so no secret is cut in two
    and left unrecognised by redaction."""
    api, dash = world.repo("shop/ecommerce-api"), world.repo("shop/dashboard-app")
    world.project("shop", [api, dash])
    world.session("api_db", api, messages=[("assistant", "The database for orders and customers is PostgreSQL 15.")])
    world.session("cur", api, style="cli", messages=[("user", "let's continue")])
    server = remote_embedder(world, fake)
    questions = ["which database does ecommerce-api use? postgres://ecommerce-api:S3cr3tPassw0rd@db/orders",
                 "ecommerce-api auth with token=abc123XYZ+ecommerce-api+Q9zW8xV7uT6 ?",
                 # the folder's name is what the label is for: left out, ``token for : …`` is no label
                 "token for ecommerce-api: Zx9qLm2NpR7tY4vB8kW3 rejected, why?",
                 "PIN for ecommerce-api: 482193 rejected by the orders database"]
    for question in questions:
        server.requests.clear()
        answer = world.search("cur", question, mode="hybrid")
        assert answer["semantic_status"] == "ready", answer
        asked = server.requests[-1]["body"]["input"]
        assert len(asked) == 2 and "ecommerce-api" not in asked[1], asked  # the rule applied, in one request
        secrets = ("S3cr3tPassw0rd", "Q9zW8xV7uT6", "Zx9qLm2NpR7tY4vB8kW3", "482193")
        assert not any(secret in text for text in asked for secret in secrets), asked


def test_a_project_of_one_folder_embeds_the_question_whole(world: World, fake):
    """An auto project (a git repo) has one folder: naming it narrows nothing."""
    repo = world.repo("hermes-agent")
    world.session("old", repo, messages=[("assistant", "The database is SQLite in WAL mode.")])
    world.session("cur", repo, style="cli", messages=[("user", "let's continue")])
    server = remote_embedder(world, fake)
    world.search("cur", "what database does hermes-agent use?", mode="hybrid")
    assert server.requests[-1]["body"]["input"] == ["what database does hermes-agent use?"]


def test_a_key_cut_in_the_question_is_never_sent(world: World, fake):
    """A key pasted into a question with a zero-width space or a line break inside it reaches the remote embedder
    redacted whole: the question is embedded as written (``query.embedding_text``), not in the keyword form, which
    reads both as a space and would leave the key's tail as a word of its own."""
    repo = world.repo("hermes-agent")
    world.session("old", repo, messages=[("assistant", "The OpenAI key lives in the vault, not in .env.")])
    world.session("cur", repo, style="cli", messages=[("user", "let's continue")])
    server = remote_embedder(world, fake)
    key = "sk-proj-T3BlbkFJ4x9Qm2Lw7Vn5Rk8Pz1Yc6Hd0aB"
    for cut in ("\u200b", "\n"):
        server.requests.clear()
        answer = world.search("cur", f"where did we store {key[:20]}{cut}{key[20:]} before?", mode="hybrid")
        assert answer["semantic_status"] == "ready", answer
        asked = server.requests[-1]["body"]["input"]
        pieces = {key[i : i + 8] for i in range(len(key) - 7)}
        assert not any(piece in text for text in asked for piece in pieces), (repr(cut), asked)


def test_a_key_across_the_question_cap_is_never_sent_in_part(world: World, fake):
    """A question is embedded up to ``query.MAX_QUERY_CHARS`` characters; for a remote embedder it is redacted
    before it is cut, so a key that crosses the cap is redacted whole rather than sent as the piece before the cut
    (``ghp_Z8x7C6v5B4n3M2a1S``, which no format knows). A question longer than the window redaction reads is cut
    short of the window's end."""
    from project_history_recall import query

    repo = world.repo("hermes-agent")
    world.session("old", repo, messages=[("assistant", "The OpenAI key lives in the vault, not in .env.")])
    world.session("cur", repo, style="cli", messages=[("user", "let's continue")])
    server = remote_embedder(world, fake)
    cap = query.MAX_QUERY_CHARS
    for key in ("ghp_Z8x7C6v5B4n3M2a1S9d8F7g6H5j4K3l2P1o0", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8Hs2Lk9d"):
        for lead, tail in ((cap - 17, " please"), (2 * cap - 20, " " + "why " * 300)):
            head = ("why does this fail " * cap)[:lead - 1] + " "
            server.requests.clear()
            answer = world.search("cur", head + key + tail, mode="hybrid")
            assert answer["semantic_status"] == "ready", answer
            asked = server.requests[-1]["body"]["input"]
            pieces = {key[i : i + 8] for i in range(len(key) - 7)}
            assert asked and all(len(text) <= cap for text in asked), asked
            assert not any(piece in text for text in asked for piece in pieces), (key, lead, asked[0][-60:])
