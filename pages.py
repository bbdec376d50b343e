"""Pages of one search: cursors that resume it, tied to the query, mode, filters and asker. Pure.

A cursor is a base64 JSON ``{offset, key, page one's date window}``; the key is a digest of the search it
belongs to, so a cursor of another search (or a forged one) is refused with ``bad_argument``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from . import errors
from .records import Scope

MAX_REACH = 50  # sessions one search can page through (5 pages of 10)


class BadCursor(errors.StoreError):
    """A ``cursor`` that is malformed or belongs to another search."""

    code = "bad_argument"


def search_key(*, query: str, mode: str, scope: Scope, anchor: str) -> str:
    """What a cursor is tied to: the query, mode, project, asking session or folder, and filters as typed
    (``label``: "7d" on page two is the same search as on page one)."""
    f = scope.filters
    parts: list[Any] = [query, mode, scope.project.scope_key, anchor, list(f.label) or [f.since, f.until], list(f.roles)]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Page:
    """Where a cursor points: the offset, and the date bounds page one resolved (kept for every page)."""

    offset: int
    since: float | None = None
    until: float | None = None


def make_cursor(key: str, page: Page) -> str:
    payload = json.dumps({"o": page.offset, "k": key, "s": page.since, "u": page.until}, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode()).decode().rstrip("=")


def read_cursor(cursor: str, key: str) -> Page:
    """The page a cursor points at; raises :class:`BadCursor`."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor.strip() + "=" * (-len(cursor.strip()) % 4)).decode())
        page = Page(int(raw["o"]), *(None if raw[b] is None else float(raw[b]) for b in ("s", "u")))
        cursor_key = str(raw["k"])
    except (ValueError, UnicodeDecodeError, TypeError, KeyError, OverflowError, RecursionError):
        raise BadCursor("'cursor' is not one this tool returned: drop it to start from the first page") from None
    if cursor_key != key:
        raise BadCursor("'cursor' belongs to another search: repeat the same query, mode and filters, or drop it")
    if not 0 < page.offset < MAX_REACH:
        raise BadCursor(f"'cursor' is out of range (a search pages through at most {MAX_REACH} sessions)")
    return page
