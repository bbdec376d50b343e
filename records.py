"""The records every layer passes on: a message, a session, what one search may read. Pure data, no IO.

They live at the bottom so that no module needs an IO module to name a type: the readers of state.db build
them, the services pass them on, the pure core reads them.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from .attribution import Project
from .filters import Filters


@dataclass(frozen=True)
class MessageRow:
    """One message as read: ``text`` is its searchable text (``store.fetch_messages``), ``calls`` the end of it
    that is the tool name and tool-call JSON; ``whole``: false when ``text`` is less than what Hermes' full-text
    index holds of the row (its content read otherwise than stored: a ``/skill`` turn as asked, a multimodal row's text
    parts), whose lengths there do not count ``text``."""

    id: int
    session_id: str
    role: str
    text: str
    timestamp: float | None
    calls: str = ""
    whole: bool = True


@dataclass(frozen=True)
class SessionInfo:
    """One session with its effective workspace (inherited when its row has none: see ``basis``)."""

    id: str
    cwd: str | None  # effective: inherited when the row has none
    git_repo_root: str | None  # stored, effective like cwd
    is_delegate: bool
    archived: bool
    title: str | None
    started_at: float | None
    message_count: int
    basis: str = "recorded"  # attribution.Workspace.basis; "" when the session has no workspace at all
    via: str | None = None  # the session the workspace was taken from
    source: str = ""


@dataclass(frozen=True)
class SessionDetails:
    """What an answer shows of a session beside its messages."""

    title: str | None
    started_at: float | None
    source: str  # Hermes' platform name: cli, desktop, telegram, cron...


@dataclass(frozen=True)
class RecentSession:
    """One entry of a listing, most recently active first: a session, or a conversation at its newest session with
    the conversation's start and messages (``segments`` sessions)."""

    id: str
    title: str | None
    started_at: float | None
    last_active: float | None  # the newest message's time (the start when it has none)
    message_count: int
    source: str
    segments: int = 1  # the sessions of its conversation (a compression's continuations) listed as this one


@dataclass(frozen=True)
class Scope:
    """What one search may read: the project's other sessions."""

    current: SessionInfo | None  # None when no session asks (a folder's or a whole project's scope)
    project: Project
    session_ids: tuple[str, ...]  # searchable sessions of the project, current lineage excluded
    in_project: int  # searchable sessions attributed to the project, the current one counted once
    messages: int = 0  # messages of ``session_ids`` (as last read; sizes the scan strategy)
    filters: Filters = Filters()  # message-level filters of this search
    #: The asking session when a compaction archived some of its messages in place: it is one of ``session_ids``,
    #: and of its rows only those archived are searched (the live ones are the conversation's context).
    live: str = ""
    #: The sessions of the asking session's lineage searched (``conversations.lineage``): its conversation's
    #: compressed past, its branches, parent and siblings, and itself when ``live``. A row of them that a live row
    #: of the asking session repeats (the question asked, the turns a compaction carried forward, the history a
    #: branch copied) is still in the context, and left out (``store.context_copies``).
    past: tuple[str, ...] = ()

    @functools.cached_property
    def id_set(self) -> frozenset[str]:
        """``session_ids`` as a set."""
        return frozenset(self.session_ids)

    @functools.cached_property
    def ids_json(self) -> str:
        """``session_ids`` as the JSON array the queries take."""
        return json.dumps(list(self.session_ids))
