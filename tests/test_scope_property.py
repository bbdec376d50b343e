"""Property: over random layouts of sessions, a search returns exactly the
eligible sessions of the current session's project (never another project,
Home, archived, delegate, rewound or current-lineage sessions)."""

from __future__ import annotations

from dataclasses import dataclass

from conftest import World, result_sessions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# place -> the project it belongs to (ground truth, independent of the plugin)
PLACES = {"pay": "P", "docs": "P", "quasar": "Q", "wt": "Q", "plain": "home", None: "home"}


@dataclass
class Spec:
    place: str | None
    style: str
    kind: str  # normal | continuation | delegate
    parent: int
    archived: bool
    token_msgs: int
    other_msgs: int
    rewound_tail: bool


spec_st = st.builds(
    Spec,
    place=st.sampled_from(list(PLACES)),
    style=st.sampled_from(["desktop", "cli"]),
    kind=st.sampled_from(["normal", "normal", "continuation", "delegate"]),
    parent=st.integers(0, 30),
    archived=st.integers(0, 3).map(lambda n: n == 0),
    token_msgs=st.integers(0, 2),
    other_msgs=st.integers(0, 2),
    rewound_tail=st.booleans(),
)


def build(world: World, specs: list[Spec]) -> tuple[dict[str, str], dict[str, str | None]]:
    """Create the sessions; returns (truth project per session, parent per session)."""
    truth: dict[str, str] = {}
    parents: dict[str, str | None] = {}
    continued: set[str] = set()
    for i, spec in enumerate(specs):
        sid = f"s{i:02d}"
        earlier = [f"s{j:02d}" for j in range(i)]
        parent = earlier[spec.parent % len(earlier)] if earlier else None
        kind = spec.kind if parent else "normal"
        if kind == "continuation" and (parent in continued or world.session_row(parent).get("source") == "subagent"):
            kind = "normal"
        if kind == "continuation":
            world.continuation(parent, sid)
            continued.add(parent)
            truth[sid], parents[sid] = truth[parent], parent
        elif kind == "delegate":
            world.delegate(parent, sid)
            truth[sid], parents[sid] = "delegate", parent
        else:
            place = spec.place
            cwd = world.paths[place] if place else None
            world.session(sid, cwd, style=spec.style, source="cli" if cwd else "telegram")
            truth[sid], parents[sid] = PLACES[place], None
        for k in range(spec.token_msgs):
            world.say(sid, "user" if k % 2 == 0 else "assistant", f"zebra note {i}.{k}")
        for k in range(spec.other_msgs):
            world.say(sid, "assistant", f"unrelated words {i}.{k}")
        if spec.rewound_tail:
            mid = world.say(sid, "user", "zebra rewound draft")
            world.db.rewind_to_message(sid, mid)
    for i, spec in enumerate(specs):
        if spec.archived:
            world.db.set_session_archived(f"s{i:02d}", True)
    return truth, parents


def lineage(parents: dict[str, str | None], sid: str) -> set[str]:
    root = sid
    while parents.get(root):
        root = parents[root]
    out, stack = {root}, [root]
    while stack:
        node = stack.pop()
        for child, parent in parents.items():
            if parent == node and child not in out:
                out.add(child)
                stack.append(child)
    return out


@settings(max_examples=settings.default.max_examples // 4, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(specs=st.lists(spec_st, min_size=2, max_size=14), pick=st.integers(0, 100))
def test_property_scope_isolation(world: World, specs, pick):
    if not hasattr(world, "paths"):
        pay, quasar = world.repo("pay"), world.repo("quasar")
        world.paths = {"pay": pay, "docs": world.folder("docs"), "quasar": quasar, "wt": world.worktree(quasar, "wt", "feat"), "plain": world.folder("plain")}
        world.project("Payments", [pay, world.paths["docs"]])
    world.close()
    for suffix in ("", "-wal", "-shm"):
        (world.home / f"state.db{suffix}").unlink(missing_ok=True)

    truth, parents = build(world, specs)
    candidates = [sid for sid in truth if truth[sid] != "delegate"]
    current = candidates[pick % len(candidates)]
    answer = world.search(current, "zebra", limit=10)
    got = result_sessions(answer)
    assert len(got) == len(set(got))

    archived = {sid for sid in truth if world.session_row(sid).get("archived")}
    specs_by_sid = {f"s{i:02d}": spec for i, spec in enumerate(specs)}
    live_token = {sid for sid, spec in specs_by_sid.items() if spec.token_msgs > 0}
    project = truth[current]
    own = lineage(parents, current)
    compressed = {sid for sid in own if sid != current and world.session_row(sid).get("end_reason") == "compression"}
    eligible = set()
    if project != "home":  # the conversation's live context is out; what a compression summarised away is in
        eligible = {
            sid for sid in truth
            if truth[sid] == project and sid not in archived and sid in live_token and (sid not in own or sid in compressed)
        }

    def root(sid: str) -> str:
        while parents.get(sid):
            sid = parents[sid]  # type: ignore[assignment]
        return sid

    conversations = {root(sid) for sid in eligible}  # one result a conversation
    assert set(got) <= eligible and len({root(sid) for sid in got}) == len(got), (current, project, truth, got)
    if len(conversations) <= 10:
        assert {root(sid) for sid in got} == conversations, (current, project, truth, got)
    else:
        assert len(got) == 10


def test_a_scope_follows_every_change_between_searches(world: World):
    """compute_scope answers from the census kept between searches: a new session, a session moved out, and a
    session's growth must each show at once."""
    import importlib

    workspace = importlib.import_module("hermes_plugins.project_history_recall.workspace")
    store = importlib.import_module("hermes_plugins.project_history_recall.store")
    paths = importlib.import_module("hermes_plugins.project_history_recall.paths")
    alpha, beta = world.repo("alpha"), world.repo("beta")
    world.session("a1", alpha, messages=[("user", "the websocket reconnect loop")])
    world.session("cur", alpha, messages=[("user", "what did we decide?")])

    def scope():
        conn = store.open_state_db(world.home)
        try:
            attributor = workspace.attributor_for(world.home, store.load_projects(world.home).projects)
            return workspace.compute_scope(conn, attributor, "cur", db_key=paths.state_db_key(world.home))
        finally:
            conn.close()

    assert scope().session_ids == ("a1",)
    world.session("a2", alpha, messages=[("user", "backoff with jitter")])
    assert scope().session_ids == ("a1", "a2")
    world.say("a2", "assistant", "and a cap of 30 s")
    assert scope().messages == 3
    project = world.project("beta-p", [beta])
    assert world.move("a1", project)["success"] is True
    assert scope().session_ids == ("a2",)
    world.session("a3", alpha, messages=[("user", "a third one")])
    assert (scope().session_ids, scope().messages) == (("a2", "a3"), 3)
    world.db.set_session_archived("a2", True)  # re-read as one of the newest sessions, not by a census voided
    assert (scope().session_ids, scope().messages) == (("a3",), 1)
