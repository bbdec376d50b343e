"""Message-level filters of one search (dates, role): what they admit, in SQL and in Python. Pure."""

from __future__ import annotations

import calendar
import datetime as dt
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

from .errors import echo
from .stored_text import roles_sql

#: Roles whose messages are searchable; tool output counts (a match in a command's output finds the session).
SEARCH_ROLES: tuple[str, ...] = ("user", "assistant", "tool")


@dataclass(frozen=True)
class Filters:
    """Message-level filters of one search; the default admits every searchable message.

    ``since`` inclusive, ``until`` exclusive (Unix seconds against ``messages.timestamp``; a message without
    one never passes a date bound). ``roles``: a subset of :data:`SEARCH_ROLES`, as rows are read
    (:func:`stored_text.role_of`: Hermes' notices of background work are tool output).
    """

    since: float | None = None
    until: float | None = None
    roles: tuple[str, ...] = SEARCH_ROLES
    #: The filters as the user typed them (since, until, role): what a page cursor is tied to.
    label: tuple[str, ...] = field(default=(), compare=False)

    @property
    def active(self) -> bool:
        return self != Filters()

    def sql(self, *, display: bool = False) -> tuple[str, list[Any]]:
        """``(clause, params)`` for the ``m`` alias of ``messages`` (``display``: it has ``display_kind``)."""
        clause, roles = roles_sql(self.roles, display=display)
        params: list[Any] = list(roles)
        if self.since is not None:
            clause += " AND m.timestamp >= ?"
            params.append(self.since)
        if self.until is not None:
            clause += " AND m.timestamp < ?"
            params.append(self.until)
        return clause, params

    def admits(self, role: str, timestamp: float | None) -> bool:
        """The same test as :meth:`sql`, for a message already fetched (its role as read, ``MessageRow.role``, and
        its timestamp)."""
        if role not in self.roles:
            return False
        if self.since is not None and (timestamp is None or timestamp < self.since):
            return False
        return self.until is None or (timestamp is not None and timestamp < self.until)



_RELATIVE = re.compile(r"^(\d+)\s*([hdw])$")


MAX_AGE_DIGITS = 5  # an age is at most 99999 hours, days or weeks (99999w: about 1,900 years)


_RELATIVE_SECONDS = {"h": 3600, "d": 86_400, "w": 7 * 86_400}


WHEN_FORMATS = "YYYY-MM-DD, an ISO date-time (2026-11-02T14:30, +08:00 or Z allowed), or an age such as 12h, 7d, 2w"


def parse_when(text: str, *, end: bool, now: float) -> float:
    """A ``since``/``until`` bound as Unix seconds; raises ``ValueError`` (a readable message).

    * ``YYYY-MM-DD``: that day in local time; with ``end`` the whole day is included (the next midnight).
    * An ISO date-time; without an offset, local time.
    * ``12h`` / ``7d`` / ``2w``: that long before ``now``.

    A date the clock cannot hold (``until`` 9999-12-31, ``since`` year 1 in some zones) is ``inf`` / ``-inf``.
    """
    raw = text.strip().lower()
    relative = _RELATIVE.match(raw)
    if relative:
        if len(relative.group(1).lstrip("0")) > MAX_AGE_DIGITS:
            raise ValueError(f"the age {echo(repr(text))} is too large: an age has at most {MAX_AGE_DIGITS} digits "
                             f"(up to 99999{relative.group(2)}); for longer ago give a date (YYYY-MM-DD)")
        return now - int(relative.group(1)) * _RELATIVE_SECONDS[relative.group(2)]
    try:
        day: dt.date | None = dt.date.fromisoformat(raw)  # 2026-11-02, 20261102, 2026-W44-1
    except ValueError:
        day = None
    try:
        if day is not None:
            if end and day == dt.date.max:  # the whole of year 9999: no end at all
                return math.inf
            return time.mktime((day + dt.timedelta(days=1) if end else day).timetuple())
        moment = dt.datetime.fromisoformat(raw.upper().replace(" ", "T", 1))
    except ValueError:
        raise ValueError(f"cannot read {echo(repr(text))} as a date: use {WHEN_FORMATS}") from None
    except OverflowError:  # a real date the clock cannot hold: before or after anything it can
        return _beyond(day.year if day is not None else 1)
    try:
        whole = time.mktime(moment.timetuple()) if moment.tzinfo is None else float(calendar.timegm(moment.utctimetuple()))
        return whole + moment.microsecond / 1e6  # timetuple() drops the fraction of a second
    except (OverflowError, ValueError):
        return _beyond(moment.year)


def _beyond(year: int) -> float:
    """Past the clock's range in the direction of ``year``: ``-inf`` near year 1, ``inf`` near year 9999."""
    return -math.inf if year < 5000 else math.inf


def make_filters(*, since: str | None = None, until: str | None = None, role: str | None = None) -> Filters:
    """Validated :class:`Filters` from the user's strings, relative dates counted from now; raises ``ValueError``."""
    now = time.time()
    low = parse_when(since, end=False, now=now) if since else None
    high = parse_when(until, end=True, now=now) if until else None
    if low is not None and high is not None and low >= high:
        raise ValueError(f"'since' ({echo(since)}) must be before 'until' ({echo(until)})")
    # A bound past what the clock holds bounds nothing that way; the other way it excludes everything: an error.
    if low == math.inf:
        raise ValueError(f"'since' ({echo(since)}) is out of range: later than any time this machine's clock holds")
    if high == -math.inf:
        raise ValueError(f"'until' ({echo(until)}) is out of range: earlier than any time this machine's clock holds")
    low = None if low == -math.inf else low
    high = None if high == math.inf else high
    roles = SEARCH_ROLES
    if role:
        wanted = role.strip().lower()
        if wanted not in SEARCH_ROLES:
            raise ValueError(f"'role' must be one of {', '.join(SEARCH_ROLES)}, got {echo(repr(role))}")
        roles = (wanted,)
    return Filters(since=low, until=high, roles=roles, label=(since or "", until or "", role or ""))


def describe_filters(filters: Filters) -> dict[str, Any]:
    """The active filters as the answer echoes them (local ISO times)."""
    out: dict[str, Any] = {}
    for name, value in (("since", filters.since), ("until", filters.until)):
        if value is not None:
            try:
                out[name] = dt.datetime.fromtimestamp(value).astimezone().isoformat(timespec="seconds")
            except (ValueError, OverflowError, OSError):  # e.g. year 1 in a zone behind UTC
                out[name] = f"{value:.0f} (Unix time)"
    if filters.roles != SEARCH_ROLES:
        out["role"] = filters.roles[0]
    return out
