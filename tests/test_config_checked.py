"""Settings are validated when read: a provider that cannot be used is named wherever semantic status is shown.

A misspelt ``embedding.provider: bogus`` once asked the user's consent to send
the project to ``api.openai.com`` ("... (, by https://api.openai.com/v1)"),
and said "unknown embedding provider" only after consent. Checked through
Hermes' real loader (the tool, ``/history-help``, ``/history-index``) and the
command line's ``status``.
"""

from __future__ import annotations

import json

import pytest
from conftest import World
from test_cli_commands import slash

from project_history_recall import command_line, config_schema


@pytest.fixture
def alpha(world: World, monkeypatch: pytest.MonkeyPatch) -> World:
    repo = world.repo("alpha")
    world.session("a_ws", repo, messages=[("assistant", "websocket reconnects use backoff")])
    world.session("cur", repo, style="cli", messages=[("user", "what about websocket?")])
    world.paths = {"alpha": repo}
    monkeypatch.chdir(repo)
    return world


@pytest.mark.parametrize(
    ("embedding", "named"),
    [
        ({"provider": "bogus"}, "unknown embedding provider 'bogus'"),
        ({"provider": "openai"}, "embedding.provider: openai without embedding.model"),
    ],
)
def test_a_provider_that_cannot_be_used_is_named_and_never_offered_for_consent(alpha: World, capsys, embedding, named):
    alpha.configure_embedding(**embedding)
    answer = alpha.search("cur", "websocket")
    assert answer["success"] and answer["semantic_status"] == "unavailable", answer
    assert named in answer["semantic_note"] and "consent" not in answer["semantic_note"]
    assert "api.openai.com" not in json.dumps(answer), "nothing is offered to be sent anywhere"
    assert [r["session_id"] for r in answer["results"]] == ["a_ws"], "keyword results stand"

    refused = alpha.call("project_history_semantic_consent", {"decision": "allow"}, "cur")
    assert refused["success"] is False and named in refused["error"]
    assert not (alpha.home / "plugins" / "project-history-recall" / "data" / "consent.json").exists()

    help_text = slash("history-help")
    assert "Semantic search cannot run here: config.yaml" in help_text and named in help_text
    index = slash("history-index")
    assert index.startswith("history index: unavailable: config.yaml") and named in index
    assert index.count(named) == 1, "said once, not repeated by the status lines below"

    code = command_line.main(["status"])
    out = capsys.readouterr().out
    assert code == 0 and "Semantic search: unavailable; model none usable" in out and named in out
    command_line.main(["status", "--json"])
    semantic = json.loads(capsys.readouterr().out)["semantic"]
    assert semantic["status"] == "unavailable" and named in semantic["note"]


def test_parse_settings_validates_the_provider():
    parse = config_schema.parse_settings

    def embedding(**values):
        return parse({"plugins": {"entries": {"project-history-recall": {"embedding": values}}}}).embedding

    assert embedding().problem == "" and embedding(provider="none").problem == ""
    assert embedding(provider=" OpenAI ", model="m").provider == "openai", "case and spaces do not matter"
    assert embedding(provider="openai", model="m").problem == ""
    assert "unknown embedding provider 'ollama'" in embedding(provider="ollama").problem
    assert "without embedding.model" in embedding(provider="openai", model="  ").problem
    bad_numbers = embedding(chunk_size="big", chunk_overlap=None, preload="maybe")
    assert (bad_numbers.chunk_size, bad_numbers.chunk_overlap, bad_numbers.preload, bad_numbers.problem) == \
        (512, 64, True, ""), "bad numbers and switches other than enabled fall back to their defaults"
    for on in (True, 1, "Yes", " on "):
        assert (embedding(enabled=on).enabled, embedding(enabled=on).problem) == (True, "")
    for off in (False, 0, "FALSE", "off", "no"):
        assert (embedding(enabled=off).enabled, embedding(enabled=off).problem) == (False, "")
    for unreadable in (["false"], {"x": 1}, "disabled", ""):
        assert "neither true nor false" in embedding(enabled=unreadable).problem, unreadable
