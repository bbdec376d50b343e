"""Credentials written as literals in code that the assignment and default patterns do not read, for :mod:`redact`.

Clojure's keyword maps and definitions (``{:db {:password "…"}}``, ``(def db-password "…")``, ``(System/setProperty
"db.password" "…")``), a string in parentheses assigned to a credential's name (``API_KEY = (`` then ``"…"``), the keys a Baidu AI client is built with by their place (``AipOcr("25123456", "<api key>",
"<secret key>")``), Helm's ``coalesce`` over several values before its literal (``coalesce .Values.global.auth.password
.Values.auth.password "…"``) and jq's fallback after a path with brackets (``.secrets["db-password"] // "…"``,
``.[0].password // "…"``). A named value is judged as an assignment of it to its name would be (the ``judge``
:mod:`redact` passes), a default as :mod:`code_secrets` judges one (:data:`secret_patterns.DEFAULT_SECRET` too). Pure;
linear in the length of the text (each pattern starts at a literal word or sign and reads a value after it to its end, once);
never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from . import prefilter
from . import secret_patterns as patterns
from .secret_patterns import quoted_run, replace_group

#: ``judge(name, value, bare)``: whether ``value`` (``bare``: unquoted) assigned to ``name`` is a literal credential.
Judge = Callable[[str, str, bool], bool]

#: A Clojure keyword and the string after it in a map (``:password "…"``, ``:api-key "…"``), a definition's name and
#: its string (``(def db-password "…")``, ``(def ^:private api-key "…")``; Lisp's and Scheme's ``defvar``, ``defparameter``,
#: ``defconst``, ``define``, ``setq`` and ``setf`` too, a name's earmuffs left out: ``(defvar *db-password* "…")``) and a property set by name
#: (``(System/setProperty "db.password" "…")``). Groups ``kname``/``dname``/``pname`` and ``value``.
CLOJURE_LITERAL = re.compile(
    r"(?:(?<![\w:/.-]):(?P<kname>[A-Za-z_][\w.-]{0,100}+)|\((?:def|defvar|defparameter|defconst|defconstant|defcustom|define|setq|setq-default|setf)"
    r"[ \t]++(?:\^:?[\w-]{1,30}+[ \t]++)?\*?(?P<dname>[A-Za-z_][\w.+!?-]{0,100}+)\*?"
    r"|\(System/setProperty[ \t]++\"(?P<pname>[A-Za-z_][\w.-]{0,100}+)\")[ \t]++\"(?P<value>" + quoted_run('"') + r")\""
)
#: A credential's name assigned a string in parentheses, as formatters wrap a long one (``API_KEY = (`` then ``"…"`` and
#: the rest on the next lines, ``api_key = ("…"``): the first string, judged as assigned to the name (the strings after it
#: are a key's rest, which :func:`prose_secrets.listed` reads). Groups ``name``, ``value``.
PAREN_STRING = re.compile(
    r"(?<![\w.$])(?P<name>[A-Za-z_][\w.]{0,100}+)[ \t]*+(?::[ \t]*+[\w.\[\]|, ]{1,60}+)?=[ \t]*+\(\s{0,200}+[bfru]{0,2}+(?P<q>[\"'])"
    r"(?P<value>" + quoted_run("(?P=q)") + r")(?P=q)"
)
#: A Baidu AI client built with its keys by their place (``AipOcr(APP_ID, "…", "…")``, ``AipNlp``, ``AipSpeech``,
#: ``AipFace``...): its quoted arguments. Group ``args``, the arguments to the call's ``)``.
AIP_CLIENT = re.compile(r"(?<![\w.])Aip[A-Z][A-Za-z]{1,40}+\(\s*+(?P<args>[^()\n]{1,600}+)\)")
#: A quoted argument of an :data:`AIP_CLIENT`'s that reads as a key: 16+ letters and digits with both (Baidu's API keys
#: are 24, its secret keys 32); the app's id is digits alone, a placeholder letters alone. Group ``value``.
AIP_KEY = re.compile(r"(?P<q>[\"'])(?P<value>(?=[A-Za-z0-9]{0,200}?[A-Za-z])(?=[A-Za-z0-9]{0,200}?[0-9])[A-Za-z0-9]{16,200}+)(?P=q)")
#: Helm's ``coalesce`` over several values, then a literal (``coalesce .Values.global.postgresql.auth.password
#: .Values.auth.password "…"``): the last value names it. Groups ``refs``, ``value``.
COALESCE_MANY = re.compile(r"(?<![\w.-])coalesce[ \t]++(?P<refs>[$.][\w.$ \t]{0,600}+)\"(?P<value>" + quoted_run('"') + r")\"")
#: jq's fallback after a path whose parts hold brackets (``.secrets["db-password"] // "…"``, ``.[0].password // "…"``);
#: the path starts a run (``a.password // "…"`` is JavaScript and a comment). Groups ``jpath``, ``value``.
JQ_BRACKETS = re.compile(
    r"(?<![\w\])$.])\.(?P<jpath>[\w.\[\]\"'-]{1,200}+)[ \t]*+//[ \t]*+\"(?P<value>" + quoted_run('"') + r")\""
)


def redact(text: str, redacted: str, judge: Judge) -> str:
    """``text`` with those credentials replaced by ``redacted``, the rest as it was."""
    text = prefilter.sub(CLOJURE_LITERAL, lambda m: _named(m, redacted, judge), text)
    text = prefilter.sub(PAREN_STRING, lambda m: _named(m, redacted, judge), text)
    text = prefilter.sub(AIP_CLIENT, lambda m: _aip_client(m, redacted, judge), text)
    text = prefilter.sub(COALESCE_MANY, lambda m: _default(m, m.group("refs").split()[-1] if m.group("refs").split() else "", redacted, judge), text)
    return prefilter.sub(JQ_BRACKETS, lambda m: _default(m, m.group("jpath"), redacted, judge) if "[" in m.group("jpath") else m.group(), text)


def _named(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """A :data:`CLOJURE_LITERAL` or :data:`PAREN_STRING` match, its value redacted when an assignment of it to its name would be."""
    name = next(m.group(g) for g in ("kname", "dname", "pname", "name") if g in m.re.groupindex and m.group(g))
    value = m.group("value")
    if not judge(name, value, False):
        return m.group()
    return replace_group(m, "value", redacted)


def _aip_client(m: re.Match[str], redacted: str, judge: Judge) -> str:
    """An :data:`AIP_CLIENT` call, each of its quoted arguments that reads as a key (:data:`AIP_KEY`) redacted unless a
    placeholder (``"YourApiKeyHere"``), as judged assigned to an API key."""
    args = AIP_KEY.sub(lambda k: replace_group(k, "value", redacted) if judge("api_key", k.group("value"), False) else k.group(),
                       m.group("args"))
    return m.string[m.start() : m.start("args")] + args + m.string[m.end("args") : m.end()]


def _default(m: re.Match[str], path: str, redacted: str, judge: Judge) -> str:
    """A default after ``path`` (a template's or jq's), its value redacted when the path's last word is a credential's
    name and the value reads as a password by itself (:data:`secret_patterns.DEFAULT_SECRET`)."""
    words = re.findall(r"[A-Za-z_][\w-]*", path)
    value = m.group("value")
    if not words or not patterns.DEFAULT_SECRET.fullmatch(value) or not judge(words[-1], value, False):
        return m.group()
    return replace_group(m, "value", redacted)
