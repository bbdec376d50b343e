"""A pass of redaction is skipped only when its pattern cannot match the text (:mod:`prefilter`): redaction with the
gates gives, text for text, what it gives without them."""

from __future__ import annotations

import ast
import importlib
import re
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
#: The test files whose string literals are secrets in the shapes redaction knows, and the ordinary text beside them.
CASE_FILES = ("test_prose_secrets.py", "test_semantic_faults.py", "test_bounded_work.py", "test_hostile_corpus.py")
#: The modules whose whole-text passes are gated.
GATED = ("secret_patterns", "secret_labels", "prose_secrets", "code_secrets", "command_secrets", "config_secrets", "table_secrets",
         "output_secrets", "cookie_secrets", "sql_secrets", "random_tokens", "seed_phrases", "folding", "literal_secrets")


def _cases() -> list[str]:
    found: dict[str, None] = {}
    for name in CASE_FILES:
        for node in ast.walk(ast.parse((TESTS / name).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and 6 <= len(node.value) <= 5_000:
                found[node.value] = None
    return list(found)


def _patterns() -> list[re.Pattern[str]]:
    out = []
    for name in GATED:
        module = importlib.import_module(f"project_history_recall.{name}")
        out += [v for v in vars(module).values() if isinstance(v, re.Pattern)]
    return out


def test_redaction_with_gates_is_redaction_without_them(monkeypatch):
    """Every secret and every ordinary text of the secret tests, as written and with the case of each letter turned:
    the gated redaction's text is the ungated one's (the tests beside these check what that text is)."""
    from project_history_recall import prefilter, redact

    cases = _cases()
    assert len(cases) > 2_000
    texts = [variant for text in cases for variant in (text, text.swapcase())]
    gated = [redact.redact_secrets(text) for text in texts]
    monkeypatch.setattr(prefilter, "may_match", lambda pattern, text: True)
    ungated = [redact.redact_secrets(text) for text in texts]
    assert [(t, a, b) for t, a, b in zip(texts, gated, ungated, strict=True) if a != b] == []
    assert sum(a != t for t, a in zip(texts, gated, strict=True)) > 1_000  # the cases hold secrets: redaction ran


def test_a_letter_a_gate_needs_is_found_in_every_form_the_pattern_matches():
    """For every character of the strings a gate looks for and every code point its pattern matches it with (under
    ``(?i)``), that code point lowered is the character, or the gate scans a text holding it (:data:`UNLOWERED`)."""
    from project_history_recall import prefilter

    needed = sorted({c for p in _patterns() for s in prefilter.required(p) or () for c in s})
    assert needed, "no pattern gated"
    wrong = _unfolded(needed)
    assert wrong == []


def _unfolded(letters) -> list[tuple[str, str]]:
    """The code points ``(?i)`` matches one of ``letters`` with that :func:`prefilter.fold` does not make it. Each
    search runs in the regular expression engine over every code point at once."""
    from project_history_recall import prefilter

    every = "".join(map(chr, range(sys.maxunicode + 1)))
    matched = "".join(m.group() for m in re.finditer("(?i)[" + re.escape("".join(letters)) + "]", every))
    return [(hex(ord(m.group())), c) for c in letters for m in re.finditer("(?i)" + re.escape(c), matched)
            if prefilter.fold(m.group()) != prefilter.fold(c)]


def test_every_letter_folds_as_ignorecase_matches_it():
    """Every cased letter of the Basic Multilingual Plane's scripts a pattern may name (Latin, Greek, Cyrillic, the
    ligatures): whatever it is written as, ``(?i)`` and :func:`prefilter.fold` agree."""
    letters = [chr(cp) for cp in [*range(0x41, 0x5B), *range(0xC0, 0x250), *range(0x370, 0x530), *range(0x1E00, 0x2000),
                                  *range(0xFB00, 0xFB07)] if chr(cp).isalpha() and len(chr(cp).lower()) == 1]
    assert _unfolded(letters) == []


def test_a_text_holding_a_letter_lower_case_does_not_make_is_still_gated():
    """A µ (``µs``), a Turkish ı or a Greek word's final ς in a text no longer turns every gate off; a text whose ſ or
    final Σ makes a required string is still scanned."""
    from project_history_recall import prefilter

    password = re.compile(r"(?i)password=\S+")
    assert not prefilter.may_match(password, "latency 12µs, the ıı of ΚΩΔΙΚΟΣ")
    assert prefilter.may_match(password, "paſſword=x") and password.search("paſſword=x")
    assert prefilter.may_match(password, "PAſSWORD=x") and password.search("PAſSWORD=x")
    sigma = re.compile(r"(?i)κωδικοσ")
    assert prefilter.required(sigma) == ("κωδικοσ",)
    assert prefilter.may_match(sigma, "ΚΩΔΙΚΟΣ") and sigma.search("ΚΩΔΙΚΟΣ")
    assert prefilter.may_match(sigma, "κωδικος: x") and sigma.search("κωδικος: x")
    dotted = re.compile(r"(?i)pin=\d+")
    assert prefilter.may_match(dotted, "PİN=1234") and dotted.search("PİN=1234")


def test_most_passes_are_gated():
    """The parse trees of this Python read: a gate for most patterns (else every pass runs, correct but slow)."""
    from project_history_recall import prefilter

    patterns = _patterns()
    gated = [p for p in patterns if prefilter.required(p) is not None]
    assert len(gated) > 0.6 * len(patterns)


@pytest.mark.parametrize("pattern,strings", [
    (r"(?i)pass(?:wo?rd)?|key", ("key", "pass")),
    (r"a[bc]d", ("abd", "acd")),
    (r"\d+-(?:x|y)z{2}", ("-xzz", "-yzz")),
    (r"(?:sk|rk)_[a-z]+_live", ("_live",)),
    (r"(?P<q>[\"'])(?P<v>[^\"']+)(?P=q)", ('"', "'")),
    (r"(?:a|b*)c", ("c",)),
    (r"(?P<a>q)?(?(a)xy|zw)", ("xy", "zw")),
    (r"\w+", None),
    (r"x?", None),
    (r"(?<=password)=\w+", ("=",)),
    (r"(?=token)\w+", None),
])
def test_the_strings_a_pattern_needs(pattern, strings):
    from project_history_recall import prefilter

    assert prefilter.required(re.compile(pattern)) == strings


def test_a_text_with_a_letter_lower_case_does_not_make_is_scanned():
    """``ſ`` is an ``s`` to ``(?i)``, not to ``str.lower``: a text holding it is scanned."""
    from project_history_recall import prefilter

    pattern = re.compile(r"(?i)password=\S+")
    assert prefilter.required(pattern) == ("password=",)
    assert not prefilter.may_match(pattern, "no secret here")
    assert prefilter.may_match(pattern, "PASSWORD=x")
    assert prefilter.may_match(pattern, "paſsword=x") and pattern.search("paſsword=x")
