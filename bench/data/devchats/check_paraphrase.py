#!/usr/bin/env python3
"""Check the devchats set: evidence ids exist, paraphrase questions share no word with their evidence.

Usage::

    python3 bench/data/devchats/check_paraphrase.py [SET_DIR]

``SET_DIR`` defaults to this script's own folder. For every numbered chat
folder it loads ``chat.json`` and ``probing_questions.json`` and checks:

* every question of every type has a non-empty ``source_chat_ids`` and every
  id exists in that chat's ``chat.json``;
* every ``paraphrase`` question shares no content word with its evidence
  messages. A content word is a token of 3+ characters (letters/digits, with
  at least one letter; identifiers are split at ``_``, ``-``, ``.`` and
  camelCase boundaries) that is not an English stop word. Two words match when
  they are equal case-insensitively after stripping a trailing
  "s"/"es"/"ed"/"ing" (the check also tries "d" and "ing" -> "e", so "used"
  matches "use" and "caching" matches "cache": stricter, never looser);
* for the CJK part of a paraphrase question: after cutting out a few function
  words (FUNCTION_WORDS below), no 2-character sequence of the question may
  occur in the evidence messages.

Both checks apply to every paraphrase question, whatever its language.
Prints each violation and exits 1 if there is any (0 otherwise). Standard
library only.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

# The bench's English stop-word list (bench/stopwords.py), the one the recall bench's reference uses.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from stopwords import EN_STOP_WORDS  # noqa: E402

# Chinese function words cut out of a question before taking its 2-character sequences.
FUNCTION_WORDS = sorted(
    """
    我们 你们 咱们 什么 怎么 怎样 之前 为什么 为啥 哪个 哪些 哪里 哪儿 多少 当时 上次 那次 这次 一下 这个 那个
    这些 那些 时候 还是 是不是 有没有 是否 如何 现在 后来 最后 当初 一开始 的 了 吗 呢 吧 啊 呀 么 是 在 和 与 及
    把 被 对 给 就 都 也 又 还 要 会 能 得 地 着 过 个 这 那 我 你 他 它
    """.split(),
    key=len,
    reverse=True,
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_TOKEN = re.compile(r"[A-Za-z0-9]+")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def words(text: str) -> set[str]:
    """Content words of ``text``, lower-cased (stop words and short tokens dropped)."""
    out: set[str] = set()
    text = text.replace("\u2019", "'")
    # drop contractions' tails so "don't" -> "don", which is then caught as a stop word below
    for chunk in re.findall(r"[A-Za-z0-9']+", text):
        if chunk.lower() in EN_STOP_WORDS:
            continue
        for part in _TOKEN.findall(chunk.split("'", 1)[0]):
            for piece in _CAMEL.split(part):
                w = piece.lower()
                if len(w) >= 3 and any(c.isalpha() for c in w) and w not in EN_STOP_WORDS:
                    out.add(w)
    return out


def forms(word: str) -> set[str]:
    """The word and its stripped variants (plural / past / gerund)."""
    out = {word}
    if word.endswith("ing") and len(word) > 4:
        out.add(word[:-3])
        out.add(word[:-3] + "e")
    if word.endswith("ed") and len(word) > 3:
        out.add(word[:-2])
        out.add(word[:-1])
    if word.endswith("es") and len(word) > 3:
        out.add(word[:-2])
    if word.endswith("s") and len(word) > 3:
        out.add(word[:-1])
    return out


def cjk_bigrams(question: str) -> set[str]:
    """2-character CJK sequences of the question, after cutting out function words."""
    text = question
    for fw in FUNCTION_WORDS:
        text = text.replace(fw, " ")
    grams: set[str] = set()
    for run in _CJK_RUN.findall(text):
        for i in range(len(run) - 1):
            grams.add(run[i : i + 2])
    return grams


def message_index(chat: list) -> dict[int, str]:
    out: dict[int, str] = {}
    for batch in chat:
        for turn in batch.get("turns") or []:
            for msg in turn:
                out[int(msg["id"])] = msg.get("content") or ""
    return out


def check_folder(folder: Path) -> list[str]:
    problems: list[str] = []
    chat = json.loads((folder / "chat.json").read_text(encoding="utf-8"))
    questions = json.loads((folder / "probing_questions.json").read_text(encoding="utf-8"))
    messages = message_index(chat)
    for qtype, items in questions.items():
        for index, item in enumerate(items):
            where = f"{folder.name}/{qtype}[{index}]"
            ids = item.get("source_chat_ids") or []
            if not ids:
                problems.append(f"{where}: no source_chat_ids")
                continue
            missing = [i for i in ids if i not in messages]
            if missing:
                problems.append(f"{where}: unknown evidence ids {missing}")
                continue
            if qtype != "paraphrase":
                continue
            question = item.get("question") or ""
            evidence = "\n".join(messages[i] for i in ids)
            ev_forms: set[str] = set()
            for w in words(evidence):
                ev_forms |= forms(w)
            shared = sorted(w for w in words(question) if forms(w) & ev_forms)
            if shared:
                problems.append(f"{where}: shares words {shared}: {question}")
            grams = sorted(g for g in cjk_bigrams(question) if g in evidence)
            if grams:
                problems.append(f"{where}: shares 2-char sequences {grams}: {question}")
    return problems


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent
    folders = sorted(
        (p for p in root.iterdir() if p.is_dir() and p.name.isdigit() and (p / "chat.json").is_file()),
        key=lambda p: int(p.name),
    )
    if not folders:
        print(f"no chat folders under {root}")
        return 1
    problems: list[str] = []
    checked = 0
    for folder in folders:
        problems += check_folder(folder)
        data = json.loads((folder / "probing_questions.json").read_text(encoding="utf-8"))
        checked += sum(len(v) for v in data.values())
    for p in problems:
        print(p)
    print(f"{len(folders)} chats, {checked} questions checked, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
