"""Reports for people, not the model: projects, index progress, profile status, installed copies.

Called by the entry points (``commands.py``, ``command_line.py``); the semantic
rules (consent, provider) are ``gate.py``'s. Nothing here writes: state.db,
projects.db and embeddings.db are opened read-only (``store.connect_ro``),
nothing is embedded, and a missing file is reported, never created.

Each report is a plain JSON-ready dict with ``success``; failures a caller
must report are raised as :class:`errors.StoreError` (no state.db).
"""

from __future__ import annotations

import shlex
import sqlite3
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import config_schema, consent, errors, gate, index_reads, paths, settings, store, workspace
from .settings import load_settings

if TYPE_CHECKING:  # vector_file needs numpy, which a keyword-only install lacks
    from .vector_file import Head

DIST_NAME = "project-history-recall"


def plugin_version() -> str:
    """The plugin's version: ``plugin.yaml`` beside this file (every install route ships it), else ``"unknown"``."""
    import yaml

    try:
        manifest = yaml.safe_load((Path(__file__).with_name("plugin.yaml")).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        manifest = None
    if isinstance(manifest, dict) and manifest.get("version"):
        return str(manifest["version"])
    return "unknown"


def command_line_hint() -> str:
    """How to start the command line from this install, as a shell command.

    A pip install has the console script (when it is on PATH). A plugin
    folder has none, and its name cannot be imported: it is run by path with
    the Python that runs Hermes (``__main__.py`` loads the folder).
    """
    import shutil

    here = Path(__file__).resolve().parent
    if here.name == "project_history_recall" and shutil.which(DIST_NAME):
        return DIST_NAME
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(here))}"


ENTRY_POINT_GROUP = "hermes_agent.plugins"  # where Hermes looks for pip-installed plugins


def _pip_copy() -> Path | None:
    """The folder of the pip-installed copy (the ``hermes_agent.plugins`` entry point of this plugin), else ``None``.

    Found on ``sys.path`` without importing it, and without ``sys.modules``
    (where the command line, run by path, has put the folder copy under the
    package's name).
    """
    from importlib import machinery

    found = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == config_schema.PLUGIN_KEY]
    if not found:
        return None
    spec = machinery.PathFinder.find_spec(found[0].module.split(".")[0])
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]).resolve() if locations else None


def _folder_copies(home: Path) -> list[Path]:
    """The profile's plugin folders (``$HERMES_HOME/plugins/*``) whose ``plugin.yaml`` names this plugin, sorted."""
    import yaml

    found = []
    try:
        children = sorted(p for p in (Path(home) / "plugins").iterdir() if p.is_dir())
    except OSError:
        return []
    for child in children:
        try:
            manifest = yaml.safe_load((child / "plugin.yaml").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        if isinstance(manifest, dict) and manifest.get("name", child.name) == config_schema.PLUGIN_KEY:
            found.append(child.resolve())
    return found


def install_copies(home: Path) -> dict[str, Any]:
    """Which copies of the plugin this profile and this Python hold, and which one Hermes loads. Only reads.

    Returns ``{this, loaded, pip, folders, note}``: ``this`` is the folder of
    the code running now; ``pip`` the pip package's folder (``None`` without
    one); ``folders`` the profile's plugin folders holding this plugin;
    ``loaded`` the copy Hermes 0.19's loader loads (it reads plugin folders,
    then entry points, and a later source replaces an earlier one of the same
    name, so the pip package wins; of two folders, the last in name order);
    ``note`` says what to do when there is more than one copy (else ``""``).
    """
    this = Path(__file__).resolve().parent
    pip, folders = _pip_copy(), _folder_copies(home)
    loaded = pip or (folders[-1] if folders else this)
    copies = ([pip] if pip else []) + [f for f in folders if f != pip]
    note = ""
    if len(copies) > 1:
        others = [str(c) for c in copies if c != loaded]
        kind = "the pip package" if loaded == pip else "the plugin folder"
        note = (f"{len(copies)} copies of {config_schema.PLUGIN_KEY} are installed; Hermes loads {kind} {loaded}, not "
                f"{' or '.join(others)}")
        if pip:
            note += ("; `hermes plugins update` updates only a plugin folder, which is not the copy loaded. Keep one: "
                     f"`hermes plugins remove {config_schema.PLUGIN_KEY}` removes the folder, "
                     f"`{shlex.quote(sys.executable)} -m pip uninstall {DIST_NAME}` the pip package")
        else:
            note += "; remove the folders you do not use"
    return {"this": str(this), "loaded": str(loaded), "pip": str(pip) if pip else None,
            "folders": [str(f) for f in folders], "note": note}


def folder_of(cwd: str | Path) -> str:
    """``cwd`` as Hermes would record it for a session started there (absolute, symlinks resolved)."""
    return str(Path(cwd).expanduser().resolve())


# ---------------------------------------------------------------------------
# Semantic configuration and consent (no model loaded, nothing sent)
# ---------------------------------------------------------------------------


def semantic_config(home: Path) -> dict[str, Any]:
    """What semantic search would use in profile ``home`` and what the user agreed to, as :func:`gate.closed` decides
    it for any project; never raises.

    Returns ``{provider, endpoint, model, consent, status, note}`` (``install`` when a package is missing):
    ``status`` is the gate's (``disabled``, ``unavailable``, ``consent_required``) or ``allowed``, ``note`` its
    reason (for ``consent_required`` in words for a person, not the agent's instruction); ``endpoint``
    and ``model`` are ``None`` for a provider that cannot be used; ``consent`` is the recorded answer with its
    endpoint redacted (``None`` when there is none or it cannot be read).
    """
    from . import redact  # here, not as Hermes loads this module: redaction compiles its patterns as it loads

    settings = load_settings(home)
    emb = settings.embedding
    spec = config_schema.provider_spec(settings) if emb.provider in ("local", "openai") else None
    path = paths.consent_path(home)
    read = consent.load_consent(path)
    record = read.record
    shown: dict[str, Any] | None = None
    if record is not None:
        shown = {k: record.get(k) for k in ("declined", "projects", "provider", "endpoint", "model", "confirmed_at") if k in record}
        if isinstance(record.get("endpoint"), str):  # a record from an older version may hold credentials
            shown["endpoint"] = redact.redact_url(record["endpoint"])
    closed = gate.closed(home, settings)  # the gate a search asks, in its order
    projects = (record or {}).get("projects") or []
    out: dict[str, Any] = {"provider": emb.provider, "endpoint": spec.endpoint if spec else None,
                           "model": (spec.model or None) if spec else None, "consent": shown,
                           "status": closed.status if closed else "allowed",
                           "note": closed.note if closed else
                           f"consent covers {'every project' if '*' in projects else f'{len(projects)} project(s)'}"}
    if closed is not None and closed.install:
        out["install"] = closed.install
    if closed is not None and closed.status == "consent_required" and spec is not None:
        # The gate's note tells the agent which tool to call; a person reading status is told what to do.
        if read.problem:
            out["note"] = (f"the consent file {path} is {read.problem}, so it counts as no consent; ask the agent to "
                           "search history and answer its question again (its consent tool rewrites the file)")
        else:
            where = gate.embedded_where(spec)
            out["note"] = f"no consent yet for {spec.model} ({where}); ask the agent to search history and answer its question"
            if record is not None and not consent.consent_matches(record, spec):
                out["note"] += (f" (the recorded consent is for {record.get('model')} at "
                                f"{redact.redact_url(str(record.get('endpoint')))})")
    return out


def _model(home: Path) -> tuple[str | None, int]:
    """The configured model's ``(fingerprint, vector size)`` (the index key; size 0 when not known before a
    reply), or ``(None, 0)`` when there is no usable provider."""
    settings = load_settings(home)
    if gate.missing_requirements(settings):  # numpy and the local model are optional in a keyword-only install
        return None, 0
    from . import embeddings

    try:
        provider = gate.make_provider(settings, home)
    except embeddings.EmbeddingUnavailable:
        return None, 0
    return provider.fingerprint, int(provider.dims)


def index_file_report(home: Path, session_ids: list[str] | None = None) -> dict[str, Any]:
    """What ``embeddings.db`` holds; never creates or changes a file.

    Returns ``{path, found, bytes, chunks, messages_indexed, damaged_vectors}``:
    ``messages_indexed`` counts messages embedded with the configured model
    (of ``session_ids`` when given), ``damaged_vectors`` that model's vectors
    of the wrong size among the chunks its vector files have not copied yet:
    what the next semantic search drops (each chunk's size was checked as it
    was copied; the index command looks through the whole file, not every
    status: reading every vector's size is reading the file). ``error`` is
    set when the file cannot be read or used;
    when searches cannot use it until the user acts (``index_file.IndexBlocked``),
    ``code`` and ``temporary`` come with it, as the index command answers.
    """
    path = paths.embeddings_db_path(home)
    problem = None
    if not gate.missing_requirements(load_settings(home)):  # index_file needs numpy
        from . import index_file

        problem = index_file.index_problem(path)
    out: dict[str, Any] = {"path": str(path), "found": path.is_file()}
    if problem is not None:
        out.update(error=str(problem), code=problem.code, temporary=problem.temporary)
    if not out["found"]:
        return {**out, "bytes": 0, "chunks": 0, "messages_indexed": 0, "damaged_vectors": 0}
    out["bytes"] = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.is_file())
    fingerprint, dims = _model(home)
    if problem is None and fingerprint:  # what stops searches from writing the model's shared vector files
        from . import index_file, vector_file

        problem = index_file.first_blocker(vector_file.VectorFileReader(path, fingerprint).files())
        if problem is not None:
            out.update(error=str(problem), code=problem.code, temporary=problem.temporary)
    try:
        conn = store.connect_ro(path)
    except (FileNotFoundError, sqlite3.DatabaseError) as exc:
        return {"error": f"embeddings.db unreadable: {exc}", **out}
    try:
        out["chunks"] = int(conn.execute("SELECT count(*) FROM chunks").fetchone()[0])
        sql = "SELECT count(*) FROM chunks WHERE model_fingerprint = ? AND chunk_index = 0"
        params: list[Any] = [fingerprint or ""]
        if session_ids is not None:
            import json

            sql += " AND session_id IN (SELECT value FROM json_each(?))"
            params.append(json.dumps(session_ids))
        out["messages_indexed"] = int(conn.execute(sql, params).fetchone()[0])
        copied = _copied(path, fingerprint, dims, conn) if fingerprint else None
        sizes = conn.execute(  # unary +: the rowid range, not the model's index
            "SELECT length(vector), count(*) FROM chunks WHERE id > ? AND +model_fingerprint = ? GROUP BY 1"
            " ORDER BY 2 DESC, 1 DESC", (copied.upto if copied else 0, fingerprint or "")).fetchall()
        size = dims * 4 or (copied.dims * 4 if copied else 0)
        expected = size or (sizes[0][0] if sizes else 0)  # as the index decides: commonest, larger on a tie
        out["damaged_vectors"] = sum(int(n) for size, n in sizes if size != expected)
    except sqlite3.DatabaseError as exc:
        return {"error": f"embeddings.db unreadable: {exc}", **out}
    finally:
        conn.close()
    return out


def _copied(path: Path, fingerprint: str, dims: int, conn: sqlite3.Connection) -> Head | None:
    """The head of the model's vector files when they hold copies of this embeddings.db
    (``conn``: its inode and its own token) at the model's size (``dims``, 0 when not known), else ``None``: then the
    next search copies every chunk again."""
    from . import index_file, vector_file

    head = vector_file.VectorFileReader(path, fingerprint).head()
    identity = index_file.identity(path)
    if not head.rows or identity is None or head.db != (*identity, index_file.stored_token(conn)):
        return None
    return head if not dims or head.dims == dims else None


# ---------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------


def index_status(*, home: Path, cwd: str) -> dict[str, Any]:
    """Index progress of the project of folder ``cwd``.

    Returns ``{success, cwd, project, sessions, indexable, indexed, pending,
    semantic_status, semantic_note, semantic}`` (and ``index``, see
    :func:`index_file_report`, outside Home): ``indexable`` counts the
    project's live user/assistant messages with text, ``indexed`` those
    embedded with the configured model, ``semantic_status`` is what a search
    there would report before indexing. Home has no project: nothing pending,
    ``semantic_status`` ``no_project``. Raises :class:`errors.StoreError` when
    state.db is missing or unreadable.
    """
    folder = folder_of(cwd)
    conn = store.open_state_db(home)
    try:
        scope = workspace.scope_for(conn, home, "", folder)[0]
        indexable = index_reads.count_indexable(conn, scope) if scope.session_ids else 0
    finally:
        conn.close()
    answer: dict[str, Any] = {
        "success": True,
        "cwd": folder,
        "project": scope.project.to_json(),
        "sessions": scope.in_project,
        "indexable": indexable,
        "indexed": 0,
        "pending": indexable,
        "semantic": semantic_config(home),
    }
    if scope.project.is_home:
        return {**answer, "pending": 0, "semantic_status": gate.NO_PROJECT,
                "semantic_note": "this folder is in no project: nothing to index"}
    blocked = gate.closed(home, load_settings(home), scope.project)
    index = index_file_report(home, list(scope.session_ids))
    indexed = min(int(index.get("messages_indexed") or 0), indexable)
    answer.update(indexed=indexed, pending=indexable - indexed, index=index)
    if blocked is not None:
        return {**answer, "semantic_status": blocked.status, "semantic_note": blocked.note}
    if index.get("code"):  # what a search there answers too: unavailable, and what to do
        return {**answer, "semantic_status": "unavailable", "semantic_note": index["error"]}
    status = "ready" if indexed >= indexable else ("partial" if indexed else "indexing")
    notes = [] if status == "ready" else [f"{indexable - indexed} message(s) not embedded yet"]
    if index.get("damaged_vectors"):
        notes.append(f"{index['damaged_vectors']} vector(s) of the wrong size in the index: the next semantic search "
                     "or the index command drops them and embeds their messages again")
    return {**answer, "semantic_status": status, "semantic_note": "; ".join(notes)}


def profile_status(*, home: Path) -> dict[str, Any]:
    """What the plugin finds in a Hermes profile; never raises for missing or broken files.

    Returns ``{success, version, hermes_home, home_exists, state_db,
    projects_db, semantic, index, install}``. ``state_db``: ``{path, found, sessions,
    messages}`` (``error`` when unreadable); ``projects_db``: ``{path, found,
    projects, archived}`` (``note`` when unreadable); ``semantic``: see
    :func:`semantic_config`; ``index``: see :func:`index_file_report`;
    ``install``: see :func:`install_copies`.
    ``success`` is False only when the profile folder itself does not exist (or is a file): then ``error`` and
    ``code`` (``no_profile``) say so, and ``profile_problem`` which it is (``not_found``, ``not_a_folder``).
    """
    answer: dict[str, Any] = {"success": home.is_dir(), "version": plugin_version(), "hermes_home": str(home),
                              "home_exists": home.is_dir()}
    if not home.is_dir():  # a failure answer: error and code, as every other one
        problem = "not_found" if not home.exists() else "not_a_folder"
        answer["error"] = (f"Hermes profile folder not found: {home}" if problem == "not_found" else
                           f"the Hermes profile is not a folder: {home} (HERMES_HOME names the folder that holds state.db)")
        answer["code"], answer["profile_problem"] = "no_profile", problem
    db_path = paths.state_db_path(home)
    state: dict[str, Any] = {"path": str(db_path), "found": db_path.is_file()}
    backend = settings.load_settings(home).sessions_backend
    if backend != "sqlite":  # Hermes keeps the sessions elsewhere: whether state.db is there says nothing
        state["error"] = f"Hermes keeps this profile's sessions in {errors.echo(backend)} (config.yaml database.backend), not here"
    elif state["found"]:
        try:
            conn = store.open_state_db(home)
        except errors.StoreError as exc:
            state["error"] = str(exc)
        else:
            try:
                state["sessions"], state["messages"] = store.state_counts(conn)
            except sqlite3.DatabaseError as exc:
                state["error"] = f"session database unreadable: {exc}"
            finally:
                conn.close()
    answer["state_db"] = state
    listing = store.projects_as_known(home)  # a report: a transient error said, not failed
    pdb_path = paths.projects_db_path(home)
    projects: dict[str, Any] = {"path": str(pdb_path), "found": pdb_path.is_file()}
    if listing.available:
        projects["projects"] = sum(1 for p in listing.projects if not p.archived)
        projects["archived"] = sum(1 for p in listing.projects if p.archived)
    elif listing.note:
        projects["note"] = listing.note
    answer["projects_db"] = projects
    answer["semantic"] = semantic_config(home)
    answer["index"] = index_file_report(home)
    answer["install"] = install_copies(home)
    return answer


def list_projects(*, home: Path) -> dict[str, Any]:
    """Every project with the number of searchable sessions attribution gives it.

    Returns ``{success, projects, projects_db}``; each project is the search
    answer's project shape plus ``sessions``, ``messages``, ``workspaces``
    (recorded folders) and, for explicit projects, ``folders`` and
    ``archived``. Explicit projects without sessions are listed too; Home comes
    last. Raises :class:`errors.StoreError` when state.db is missing or
    unreadable.
    """
    conn = store.open_state_db(home)
    try:
        listing = store.load_projects(home)
        attributor = workspace.attributor_for(home, listing.projects)
        census = workspace.project_census(conn, attributor)
    finally:
        conn.close()
    by_id = {p.id: p for p in listing.projects}
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for count in census:
        row: dict[str, Any] = {**count.project.to_json(), "sessions": count.sessions, "messages": count.messages,
                               "workspaces": list(count.workspaces)}
        if count.project.kind == "explicit":
            seen.add(count.project.id)
            record = by_id.get(count.project.id)
            row.update(folders=[f.path for f in record.folders] if record else [],
                       archived=bool(record and record.archived))
        rows.append(row)
    missing = [
        {"kind": "explicit", "id": p.id, "name": p.name, "sessions": 0, "messages": 0, "workspaces": [],
         "folders": [f.path for f in p.folders], "archived": p.archived}
        for p in listing.projects if p.id not in seen
    ]
    explicit = [r for r in rows if r["kind"] == "explicit"] + missing
    answer: dict[str, Any] = {
        "success": True,
        "projects": explicit + [r for r in rows if r["kind"] != "explicit"],
        "projects_db": {"path": str(paths.projects_db_path(home)), "found": listing.available},
    }
    if listing.note:
        answer["projects_note"] = listing.note
    return answer
