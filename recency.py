"""The current decision first (pure): when a query asks how things stand now, the newest session on its subject leads.

Teams revisit decisions (method names start with ``x_``, a few sessions later with ``p_``); relevance alone
ranks whichever session words it best, often the first. When the query asks for the present state
(:func:`asks_current`: "now", "these days", "现在"...), :func:`current_first` reorders the leading sessions:

1. **Each session's subject** is what of the query its counted messages match (:func:`subject`): words and
   CJK terms, less :data:`META_WORDS` ("convention", "status") and :data:`PRESENT_WORDS`, plus each pair of
   query words side by side in the text ("function names" is not "function argument names"). Quoted phrases
   and identifiers are left out.
2. **The anchor** is the session with the richest subject (by idf) among the first ``ANCHOR_REACH``.
3. **Its peers** are the sessions of the first ``PEER_REACH`` whose subject holds the anchor's and whose
   keyword score is at least ``PEER_STRENGTH`` of the best. They lead, newest first (by their best keyword
   message); the others keep their order after them. A lone peer leads only when every session above it
   states part of what it states (:func:`_part_of`).

4. **Each session's last word** (:func:`last_words`): a session shows its newest message, by the same speaker, that
   states what its shown message states ("raised the request timeout to 120 seconds" after "set it to 30").

The caller applies the rule only when the keyword leg is strong enough for its words to be the subject
(``search.CURRENT_FIRST_STRENGTH``). A session the keyword leg did not find has no subject and is never a peer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from . import unicode61
from .ranking import SESSION_MESSAGES, Hit, Scorer, Term, session_score
from .records import MessageRow

ANCHOR_REACH = 10  # sessions of the ranking whose subjects may anchor (the richest wins)
PEER_REACH = 20  # sessions of the ranking that may revisit it
PEER_STRENGTH = 0.5  # a peer's keyword score, at least this share of the best session's
PAIR_WEIGHT = 0.5  # a pair of adjacent query words adds this share of the rarer word's idf

#: Words and phrases asking how things stand now (English, matched as whole words; CJK as substrings). "Do you still
#: remember" asks for a memory, not the present.
_CURRENT = re.compile(
    r"\b(?:now|currently|current|nowadays|these days|any ?more|still(?! remember| recall| know)|latest|at the moment|at present|as of today|"
    r"most recent|up to date|today)\b|现在|目前|如今|当前|最新|现行|眼下|至今|還是|还是",
    re.IGNORECASE,
)

#: Words that name a kind of decision or ask for its state, not what it is about: they do not tell two subjects apart.
#: "use" and "uses" ask which one was chosen ("which database do we use now?"); "used" and "using" tell how
#: ("how is Redis used"), which is a subject.
META_WORDS = frozenset(
    """
    convention conventions rule rules policy policies standard standards guideline guidelines practice practices
    approach approaches decision decisions decide decided choice choices setting settings way ways status
    use uses
    """.split()
)


#: Words of the expressions asking for the present ("current", "these days", "at the moment") that are searched:
#: they say when, not what ("the current status of X" is about X).
PRESENT_WORDS = frozenset("current latest today days moment".split())


#: Words saying when that may stand inside a statement of the subject ("the API now listens on 9090"), passed over
#: when telling which query words stand side by side.
WHEN_WORDS = frozenset("now currently still nowadays anymore today".split())


def asks_current(query: str) -> bool:
    """Whether ``query`` asks for the present state of something ("what is our convention for X now?")."""
    return bool(_CURRENT.search(query))


def _aside(term: Term) -> bool:
    """Whether a matched ``term`` says nothing of the subject: a ``META_WORDS`` or ``PRESENT_WORDS`` word."""
    return term.kind == "word" and bool(term.forms) and (term.forms[0] in META_WORDS or term.forms[0] in PRESENT_WORDS)


def subject(scorer: Scorer, text: str, *, phrases: bool = False) -> frozenset[object]:
    """What of the query ``text`` matches: term indices (``META_WORDS``, words asking for the present and, unless
    ``phrases``, phrases left out) and ``(i, j)`` for query words side by side."""
    # Phrases and identifiers rank but make no subject: a project's own name ("ecommerce-api") is in most of its
    # sessions.
    meta = {i for i, t in enumerate(scorer.terms) if (t.kind == "phrase" and not phrases) or _aside(t)}
    found: set[object] = {i for i in scorer.parts(text) if i not in meta}
    word_of: dict[str, int] = {}
    for i, term in enumerate(scorer.terms):
        if term.kind == "word" and i not in meta:
            for form in term.forms:
                word_of.setdefault(form, i)
    if word_of:  # words saying when ("the API now listens") stand between no two words of a pair
        tokens = [word_of.get(t) for t in unicode61.tokens(text) if t not in WHEN_WORDS]
        for a, b in zip(tokens, tokens[1:], strict=False):
            if a is not None and b is not None and a != b:
                found.add((min(a, b), max(a, b)))
    return frozenset(found)


def subject_weight(scorer: Scorer, covered: frozenset[object]) -> float:
    """How much of the query ``covered`` states: its terms' idf, and ``PAIR_WEIGHT`` of the rarer word's per pair."""
    idf = [t.idf(scorer.grams if t.kind == "gram" else scorer.words) for t in scorer.terms]
    total = 0.0
    for part in covered:
        if isinstance(part, tuple):
            total += PAIR_WEIGHT * min(idf[part[0]], idf[part[1]])
        elif isinstance(part, int):
            total += idf[part]
    return total


def _part_of(above: str, lone: str, strength: Mapping[str, float], subjects: Mapping[str, frozenset[object]],
             stated: Mapping[str, frozenset[object]]) -> bool:
    """Whether session ``above`` states only part of what the lone peer ``lone`` states.

    One the keyword leg scores above the peer is compared on everything it matched, phrases included (one the
    peer lacks, "AI-generated", is something else); a weaker one (placed by the vector leg) on its subject alone.
    """
    if strength.get(above, 0.0) > strength[lone]:
        return stated[above] < stated[lone]
    return subjects.get(above, frozenset()) < subjects[lone]


def _by_session(hits: Sequence[Hit]) -> dict[str, list[Hit]]:
    """``hits`` grouped by session, each group in the order given."""
    groups: dict[str, list[Hit]] = {}
    for hit in hits:
        groups.setdefault(hit.session_id, []).append(hit)
    return groups


def current_first(
    ranked: Sequence[Hit],
    keyword_hits: Sequence[Hit],
    texts: Mapping[int, str],
    times: Mapping[int, float | None],
    scorer: Scorer,
) -> tuple[list[Hit], int]:
    """``(ranked with the anchor's peers first, newest first, the rest in order; how many peers lead)`` (module docstring).

    ``keyword_hits``: the keyword leg's scored messages (each session's ``SESSION_MESSAGES`` best make its
    subject and strength); ``texts``/``times``: message id -> text / timestamp (missing: unmatched / undated).
    Returns ``(list(ranked), 0)`` when no peer leads.
    """
    by_session = _by_session(keyword_hits)
    strength: dict[str, float] = {}
    subjects: dict[str, frozenset[object]] = {}
    stated: dict[str, frozenset[object]] = {}  # the subject with the phrases matched: what a lone peer is compared on
    when: dict[str, float] = {}
    for hit in ranked[:PEER_REACH]:
        hits = sorted(by_session.get(hit.session_id, ()), key=lambda h: (-h.score, -h.message_id))[:SESSION_MESSAGES]
        if not hits:
            continue
        strength[hit.session_id] = session_score(h.score for h in hits)
        own = [texts[h.message_id] for h in hits if h.message_id in texts]
        subjects[hit.session_id] = frozenset().union(*(subject(scorer, text) for text in own))
        stated[hit.session_id] = frozenset().union(*(subject(scorer, text, phrases=True) for text in own))
        when[hit.session_id] = times.get(hits[0].message_id) or 0.0
    leading = [h for h in ranked[:ANCHOR_REACH] if subjects.get(h.session_id)]
    if not leading:
        return list(ranked), 0
    weight = {h.session_id: subject_weight(scorer, subjects[h.session_id]) for h in leading}
    anchor = subjects[max(leading, key=lambda h: (weight[h.session_id], strength[h.session_id])).session_id]
    floor = PEER_STRENGTH * max(strength.values())
    peers = [h for h in ranked[:PEER_REACH]
             if h.session_id in subjects and subjects[h.session_id] >= anchor and strength[h.session_id] >= floor]
    if not peers:
        return list(ranked), 0
    chosen = {h.session_id for h in peers}
    if len(peers) == 1:  # nothing revisits the subject: it leads only if it states more of it than each session above
        lone = peers[0].session_id
        above = [h.session_id for h in ranked[: ranked.index(peers[0])]]
        if not above or not all(_part_of(sid, lone, strength, subjects, stated) for sid in above):
            return list(ranked), 0
    peers.sort(key=lambda h: -when[h.session_id])  # stable: equal times keep their rank order
    return peers + [h for h in ranked if h.session_id not in chosen], len(peers)


def last_words(ranked: Sequence[Hit], keyword_hits: Sequence[Hit], rows: Mapping[int, MessageRow],
               scorer: Scorer) -> list[Hit]:
    """``ranked`` with the message of each of its first ``PEER_REACH`` sessions moved to that session's last word on
    its subject: the newest message of the same speaker (user or assistant) that the keyword leg scored and whose
    :func:`subject` holds the shown message's ("Raised the request timeout to 120 seconds" 26 messages after "Set the
    request timeout to 30 seconds"). A message the keyword leg did not score stays, and so does a session's found by
    meaning alone (``found_by`` "semantic": semantic mode chose its message by meaning, not by the words); so does the
    order of the sessions. ``rows``: message id -> the row (its text, role, time)."""
    by_session = _by_session(keyword_hits)

    def later(row: MessageRow) -> tuple[float, int]:
        return (row.timestamp or 0.0, row.id)

    out = list(ranked)
    for i, hit in enumerate(out[:PEER_REACH]):
        shown = rows.get(hit.message_id)
        own = by_session.get(hit.session_id, [])
        if (hit.found_by == "semantic" or shown is None or shown.role not in ("user", "assistant")
                or all(h.message_id != shown.id for h in own)):
            continue
        newer = sorted((rows[h.message_id] for h in own if h.message_id in rows and rows[h.message_id].role == shown.role
                        and later(rows[h.message_id]) > later(shown)), key=later, reverse=True)
        if not newer:
            continue
        about = subject(scorer, shown.text)
        last = next((row for row in newer if about and subject(scorer, row.text) >= about), None)
        if last is not None:
            out[i] = Hit(last.id, hit.session_id, hit.score, hit.found_by)
    return out


#: Said in the answer when several sessions on the query's subject were put newest first.
ORDER_NOTE = ("The query asks how things stand now: the first {count} sessions revisit the same subject and come newest "
              "first; compare their 'when' to see which decision superseded which.")
