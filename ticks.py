"""IO shell: the copies of one message told apart a clock tick at a time, where a tick holds many rows.

Rows of a session alike in their clock tick are one message to Hermes (``layout``: shown once, as its live row, else
its newest, where its first row lies). Asking that of one row compares it with the other rows of its tick: a few rows
in an ordinary tick, every row of it in a tick of T rows written at one time (an import, an old gateway turn stamped
once, compacted in place): T x T for a reader that asks each row of such a tick. :class:`Ticks` groups a tick of more
than ``layout.LARGE_TICK`` rows once, the first time one of its rows is asked, and answers its other rows from that;
a small tick is asked row by row.

One :class:`Ticks` serves the readers of one connection that ask of rows they hold, a batch or a page at a time
(``store.visible_of``: a search's picks, a read, the index command's run); one statement that finds its rows itself (a
scan) groups their large ticks in the statement instead (``store.visible`` given ``among``), with the same window.
A row of a large tick that is not in its grouping (written since) has the tick grouped again; a row changed since is
answered as it was: a copy told as its message, or a message as a copy, until the next connection. Whether a row is
shown at all (rewound, hidden) every reader asks of the row itself.

Read-only; raises ``sqlite3`` errors.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from .layout import Layout


class Ticks:
    """The large clock ticks one reader met, each grouped once: ``{(session, timestamp): {id: (first, shown)}}``."""

    def __init__(self, conn: sqlite3.Connection, shape: Layout) -> None:
        self.conn, self.shape = conn, shape
        self.grouped: dict[tuple[str, float], dict[int, tuple[int, int]]] = {}

    def _rows(self, session_id: str, timestamp: float, message_id: int) -> dict[int, tuple[int, int]]:
        """The grouping of the tick ``(session_id, timestamp)``, holding row ``message_id`` unless it is gone."""
        key = (session_id, timestamp)
        if message_id not in self.grouped.get(key, ()):  # first met, or written since it was grouped
            self.grouped[key] = {int(i): (int(first), int(shown)) for i, first, shown
                                 in self.conn.execute(self.shape.tick_sql(), key)}
        return self.grouped[key]

    def shown_here(self, message_id: int) -> int | None:
        """The id of the row Hermes shows of row ``message_id``'s message when that row is where Hermes shows it (the
        message's first row), else ``None`` (a copy shown where an earlier row lies, or a row gone)."""
        row = self.conn.execute(self.shape.shown_here_sql(), (message_id,)).fetchone()
        if row is None:
            return None
        session_id, timestamp, large, shown = row
        if not large:
            return None if shown is None else int(shown)
        first, shown = self._rows(str(session_id), timestamp, message_id).get(message_id, (None, None))
        return shown if first == message_id else None

    def first_row(self, message_id: int) -> tuple[float, int] | None:
        """``(timestamp, id)`` of the first row of row ``message_id``'s message (where Hermes shows it); ``None`` for
        a row gone."""
        row = self.conn.execute(self.shape.first_row_sql(), (message_id,)).fetchone()
        if row is None:
            return None
        session_id, timestamp, large, first = row
        if large:
            first = self._rows(str(session_id), timestamp, message_id).get(message_id, (message_id, message_id))[0]
        return timestamp, int(first if first is not None else message_id)

    def told(self, ids: Sequence[int]) -> tuple[str, str]:
        """Of the rows ``ids``, those not live in large ticks, told apart here: JSON of their ids and JSON of those
        of them that are the row Hermes shows of their message (``layout.Layout.visible_told_sql``'s parameters)."""
        told, shown = [], []
        for mid, session_id, timestamp in self.conn.execute(self.shape.large_archived_sql(),
                                                            (json.dumps([int(i) for i in ids]),)).fetchall():
            told.append(int(mid))
            if self._rows(str(session_id), timestamp, int(mid)).get(int(mid), (0, 0))[1] == mid:
                shown.append(int(mid))
        return json.dumps(told), json.dumps(shown)
