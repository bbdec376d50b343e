"""consent.json written by two answers at once (two tool calls, or two Hermes processes)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from project_history_recall import consent


def test_two_answers_written_at_once_neither_fails_and_the_last_one_stands(tmp_path, monkeypatch):
    """Answer B is written whole while answer A is half-way (its text written, not yet in place):
    each writer has its own temporary file, so A is not told the folder cannot be written, and
    the file holds A's answer, the one that landed last."""
    path = tmp_path / "data" / "consent.json"
    first, second = {"declined": True, "profile": "a"}, {"declined": True, "profile": "b"}
    real_replace = Path.replace
    nested = []

    def interleave_then_replace(self, target):
        if not nested:  # A's text is written to its temporary file, not yet in place
            nested.append(self)
            other = threading.Thread(target=consent.write_consent, args=(path, second))  # the other answer, whole
            other.start()
            other.join()
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", interleave_then_replace)
    consent.write_consent(path, first)
    assert nested, "the other answer was written while the first was half-way"
    assert json.loads(path.read_text(encoding="utf-8")) == first
    assert sorted(p.name for p in path.parent.iterdir()) == ["consent.json"], "no temporary file left behind"


def test_a_consent_file_nested_too_deep_reads_as_damaged(tmp_path):
    """consent.json of brackets nested past the parser's depth: a damaged file (no consent, and why), never an
    error out of the read (it raised RecursionError into every search and status). A million: Python 3.14's parser
    takes 50,000 and stops where the thread's stack would overflow, 3.11's at its recursion limit."""
    path = tmp_path / "consent.json"
    path.write_text("[" * 1_000_000, encoding="utf-8")
    found = consent.load_consent(path)
    assert found.record is None and "nested too deep" in found.problem
