"""The pure attribution rules (design §3.1), as a table and as properties."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from work import linear, measure

from project_history_recall import attribution as A


def record(pid, name, *folders, slug="", primary_path=None, archived=False):
    """A project as ``store.load_projects`` hands it to attribution."""
    return A.ProjectRecord(pid, name, slug, primary_path, archived, tuple(A.ProjectFolder(f) for f in folders))


P_ALPHA = record("p_alpha", "Alpha", "/w/alpha", "/w/docs/alpha-notes", slug="alpha")
P_SRC = record("p_src", "Alpha src", "/w/alpha/src/", slug="alpha-src")
P_WIN = record("p_win", "Win", "C:\\Users\\Dev\\Repo", slug="win")
P_UNC = record("p_unc", "Share", "\\\\server\\share\\proj", slug="share")
P_OLD = record("p_old", "Old", "/w/old", slug="old", archived=True)
P_PRIMARY_ONLY = record("p_prim", "Prim", slug="prim", primary_path="/w/prim")
PROJECTS = [P_ALPHA, P_SRC, P_WIN, P_UNC, P_OLD, P_PRIMARY_ONLY]


def explicit(p):
    return A.Project("explicit", id=p.id, name=p.name)


def auto(root, name):
    return A.Project("auto", key=A.path_key(root), root=root, name=name)


CASES = [
    # (cwd, git_repo_root, expected, why)
    ("/w/alpha", None, explicit(P_ALPHA), "folder itself"),
    ("/w/alpha/", None, explicit(P_ALPHA), "trailing separator ignored"),
    ("/w/alpha/lib/x", None, explicit(P_ALPHA), "descendant"),
    ("/w/alpha/src", None, explicit(P_SRC), "longest ancestor wins (nested project)"),
    ("/w/alpha/src/deep/er", None, explicit(P_SRC), "longest ancestor, deeper"),
    ("/w/alphabet", None, A.HOME, "no prefix match across a segment boundary"),
    ("/w/alphabet", "/w/alphabet", auto("/w/alphabet", "alphabet"), "segment boundary, falls to auto"),
    ("/w/docs/alpha-notes/2024", None, explicit(P_ALPHA), "second folder of the same project"),
    ("/w/alpha-wt-feat", "/w/alpha", explicit(P_ALPHA), "worktree cwd, main repo root in the project"),
    ("/w/./alpha/../alpha/x", None, explicit(P_ALPHA), "dot segments resolved lexically"),
    ("/W/ALPHA", None, A.HOME, "POSIX paths are case-sensitive"),
    ("c:/users/dev/repo/src", None, explicit(P_WIN), "Windows: casefold and either separator"),
    ("C:\\USERS\\DEV\\REPO", None, explicit(P_WIN), "Windows: backslashes, upper case"),
    ("C:\\Users\\Dev\\Repository", None, A.HOME, "Windows: segment boundary"),
    ("\\\\SERVER\\Share\\proj\\x", None, explicit(P_UNC), "UNC paths"),
    ("/w/old/x", None, A.HOME, "archived projects never match"),
    ("/w/old/x", "/w/old", auto("/w/old", "old"), "archived project: auto by root"),
    ("/w/prim/sub", None, explicit(P_PRIMARY_ONLY), "primary_path counts as a folder"),
    ("/w/other", "/w/other", auto("/w/other", "other"), "git root, no project"),
    ("/w/other/pkg", "/w/other", auto("/w/other", "other"), "subfolder of a repo"),
    (None, "/w/other", auto("/w/other", "other"), "root only (continuation inherited it)"),
    ("/w/plain", None, A.HOME, "non-git folder outside projects"),
    (None, None, A.HOME, "nothing recorded"),
    ("", "  ", A.HOME, "blank strings"),
    ("relative/alpha", None, A.HOME, "relative paths never match absolute folders"),
]


@pytest.mark.parametrize("cwd,root,expected,why", CASES, ids=[c[3] for c in CASES])
def test_resolve_project_table(cwd, root, expected, why):
    assert A.resolve_project({"cwd": cwd, "git_repo_root": root}, PROJECTS) == expected


def test_junk_roots_are_not_auto_projects():
    """The bare home dir and anything under HERMES_HOME are not projects (desktop rule)."""
    row = {"cwd": "/home/u", "git_repo_root": "/home/u"}
    assert A.resolve_project(row, [], junk_roots=["/home/u"]) == A.HOME
    row = {"cwd": "/home/u/.hermes/skills/x", "git_repo_root": "/home/u/.hermes/skills/x"}
    assert A.resolve_project(row, [], junk_trees=["/home/u/.hermes"]) == A.HOME
    row = {"cwd": "/home/u/code/app", "git_repo_root": "/home/u/code/app"}
    assert A.resolve_project(row, [], junk_roots=["/home/u"], junk_trees=["/home/u/.hermes"]).kind == "auto"


def test_explicit_project_under_junk_is_honoured():
    proj = record("p_h", "Notes", "/home/u")
    row = {"cwd": "/home/u", "git_repo_root": "/home/u"}
    assert A.resolve_project(row, [proj], junk_roots=["/home/u"]) == explicit(proj)


def test_same_folder_in_two_projects_goes_to_the_first():
    first = record("p1", "one", "/x")
    second = record("p2", "two", "/x")
    assert A.resolve_project({"cwd": "/x/y"}, [first, second]).id == "p1"


@pytest.mark.parametrize(
    "token,expected",
    [("p_alpha", "p_alpha"), ("alpha-src", "p_src"), ("Alpha src", "p_src"), ("ALPHA", "p_alpha"), ("nope", None), ("", None), ("  ", None)],
)
def test_find_project_by_id_slug_or_name(token, expected):
    found = A.find_project(PROJECTS, token)
    assert (found.id if found else None) == expected


def test_primary_folder_order():
    assert A.primary_folder(record("p", "n", "/a", primary_path="/p")) == "/p"
    flagged = A.ProjectRecord("p", "n", folders=(A.ProjectFolder("/a"), A.ProjectFolder("/b", is_primary=True)))
    assert A.primary_folder(flagged) == "/b"
    assert A.primary_folder(record("p", "n", "/a")) == "/a"
    assert A.primary_folder(record("p", "n")) is None


# -- properties ---------------------------------------------------------------

segment = st.text(alphabet="abcxyz-._", min_size=1, max_size=5).filter(lambda s: s not in (".", ".."))
posix_path = st.lists(segment, min_size=1, max_size=5).map(lambda parts: "/" + "/".join(parts))


@given(folder=posix_path, rest=st.lists(segment, max_size=3), trailing=st.booleans())
def test_property_descendants_of_a_folder_belong_to_it(folder, rest, trailing):
    cwd = folder + "".join("/" + r for r in rest) + ("/" if trailing else "")
    proj = record("p", "n", folder)
    assert A.resolve_project({"cwd": cwd}, [proj]).kind == "explicit"


@given(folder=posix_path, suffix=st.text(alphabet="abcxyz-_", min_size=1, max_size=4))
def test_property_sibling_with_shared_prefix_never_matches(folder, suffix):
    proj = record("p", "n", folder)
    assert A.resolve_project({"cwd": folder + suffix}, [proj]) == A.HOME


@given(folders=st.lists(posix_path, min_size=1, max_size=6, unique=True), cwd=posix_path)
def test_property_winner_is_the_longest_containing_folder(folders, cwd):
    projects = [record(f"p{i}", f"n{i}", f) for i, f in enumerate(folders)]
    got = A.resolve_project({"cwd": cwd}, projects)
    containing = [f for f in folders if A.is_within(cwd, f)]
    if not containing:
        assert got == A.HOME
    else:
        best = max(len(A.path_segments(f)) for f in containing)
        winner = projects[int(got.id[1:])].folders[0].path
        assert A.is_within(cwd, winner) and len(A.path_segments(winner)) == best


@given(parts=st.lists(st.text(alphabet="AbCdEf", min_size=1, max_size=4), min_size=1, max_size=4), flip=st.booleans())
def test_property_windows_paths_ignore_case_and_separator(parts, flip):
    path = "C:\\" + "\\".join(parts)
    other = path.swapcase().replace("\\", "/") if flip else path.upper()
    assert A.path_key(path) == A.path_key(other)


def scan_explicit(candidates, projects):
    """The longest folder owning a candidate, earlier project (then folder) first on ties: every folder compared."""
    best, best_len = None, 0
    for project in projects:
        for folder in [] if project.archived else A.project_folders(project):
            segments = A.path_segments(folder)
            if len(segments) > best_len and any(A.path_segments(c)[: len(segments)] == segments for c in candidates):
                best, best_len = project, len(segments)
    return best


@given(folders=st.lists(st.lists(posix_path, min_size=1, max_size=3), min_size=1, max_size=5),
       archived=st.lists(st.booleans(), min_size=5, max_size=5), candidates=st.lists(posix_path, min_size=1, max_size=3))
def test_property_the_folder_index_matches_as_comparing_every_folder(folders, archived, candidates):
    projects = [A.ProjectRecord(f"p{i}", f"n{i}", folders=tuple(A.ProjectFolder(f) for f in fs), archived=archived[i])
                for i, fs in enumerate(folders)]
    assert A.match_explicit(candidates, A.folder_index(projects)) == scan_explicit(candidates, projects)


def scan_predecessors(rows):
    """Each /new session's predecessor as the rule says, every ended session of the window compared."""
    ended = sorted((r.ended_at, r.id, r.source) for r in rows if r.end_reason == "new_session" and r.ended_at is not None)
    taken, out = set(), {}
    fresh = [r for r in rows if not (r.cwd or r.root or r.parent) and r.source == "cli" and r.started_at is not None]
    for row in sorted(fresh, key=lambda r: (r.started_at, r.id)):
        free = [sid for at, sid, source in ended if row.started_at - A.NEW_SESSION_WINDOW_S <= at <= row.started_at
                and source == row.source and sid != row.id and sid not in taken]
        if len(free) == 1:
            out[row.id] = free[0]
            taken.add(free[0])
    return out


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30), st.booleans(), st.sampled_from(["cli", "telegram"]),
                          st.booleans()), max_size=12))
def test_property_new_sessions_find_the_predecessor_the_rule_names(specs):
    rows = [A.SessionRow(f"s{i}", cwd=None if fresh else "/w", source=source, started_at=float(start),
                         ended_at=float(start + end) if ends else None, end_reason="new_session" if ends else None)
            for i, (start, end, ends, source, fresh) in enumerate(specs)]
    assert A.new_session_predecessors(rows) == scan_predecessors(rows)


def test_a_burst_of_new_sessions_is_matched_in_linear_work(monkeypatch):
    """k sessions ended by /new and k new ones within one 10 s window (a script, or an import's timestamps): each
    new one compared every ended one of the window, taken or not (k = 1,000 → 4,000: 0.3 → 4.8 s)."""
    folder = [Path(A.__file__).parent]

    def cost(k: int) -> int:
        rows = [row for i in range(k) for row in (
            A.SessionRow(f"e{i}", cwd="/w", source="cli", started_at=1000.0, ended_at=1001.0 + i * 1e-4, end_reason="new_session"),
            A.SessionRow(f"f{i}", source="cli", started_at=1001.5 + i * 1e-4))]
        return measure(folder, monkeypatch, lambda: A.new_session_predecessors(rows))[1].total

    small, large = cost(200), cost(800)
    assert linear(small, large), (small, large)


def test_the_sessions_of_one_folder_share_one_workspace():
    """The census keeps a workspace for every session of the profile for the life of the process: 18,000 objects at
    a million messages, each walked by every full collection of Hermes' process. Sessions that record the same
    folder share one; an inherited one (a continuation's, named by the session it came from) stays its own."""
    rows = {f"s{i}": A.SessionRow(f"s{i}", cwd=f"/w/{i % 3}", root="/w") for i in range(300)}
    rows["c"] = A.SessionRow("c", parent="s1")
    rows["d"] = A.SessionRow("d", parent="s4")
    out = A.effective_workspaces(rows)
    assert out["s0"] == A.Workspace("/w/0", "/w") and out["c"] == A.Workspace("/w/1", "/w", "parent", "s1")
    assert len({id(out[f"s{i}"]) for i in range(300)}) == 3
    assert out["c"] is not out["d"] and out["d"].via == "s4"
