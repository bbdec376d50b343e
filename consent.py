"""consent.json: the user's answer to sending history to an embedding provider.

The file sits beside the index (the plugin's data folder). It holds either a
decline (``{"declined": true, ...}``) or an allow for a provider, endpoint and
model and a list of projects (``"*"``: every project); see
:func:`consent_shape_problem` for the exact shape.

Invariants: anything malformed means no consent (never an allow by default),
and :func:`load_consent` says why; a write is atomic, so a partial file is
never read as consent; consent for one endpoint never covers another, not even
the same host with another key in its URL (matched by :func:`config_schema.endpoint_digest`
of the endpoint as configured, which is never stored).
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import StoreError

if TYPE_CHECKING:
    from .config_schema import ProviderSpec

#: What an allow covers, recorded as its ``scope``: the history there is, and new messages as they come.
CONSENT_SCOPE = "history+incremental"
#: The fields that, when present, must be strings.
_CONSENT_TEXT_FIELDS = ("profile", "provider", "endpoint", "endpoint_sha256", "model", "confirmed_at", "scope")


class ConsentUnwritable(StoreError):
    """``consent.json`` cannot be written; the message names the file and the fix (the tools answer ``consent_unwritable``)."""

    code = "consent_unwritable"


@dataclass(frozen=True)
class ConsentFile:
    """``consent.json`` as read: ``record`` when it is a valid answer, else ``None``; ``problem`` says why
    a file that exists gave none (unreadable, not JSON, a field of the wrong type), ``""`` otherwise."""

    record: dict[str, Any] | None
    problem: str = ""


def consent_shape_problem(data: Any) -> str:
    """What is wrong with a parsed ``consent.json`` (``""`` when nothing).

    A decline is ``{"declined": true, ...}``; an allow needs ``projects`` (a
    list of non-empty strings), ``provider``, ``endpoint`` and ``model``
    (strings). Every known field present must have its type (``declined`` a
    boolean, the others strings); unknown fields are ignored.
    """
    if not isinstance(data, dict):
        return f"not a JSON object (it holds a {type(data).__name__})"
    if "declined" in data and not isinstance(data["declined"], bool):
        return "'declined' is not true or false"
    for key in _CONSENT_TEXT_FIELDS:
        if key in data and not isinstance(data[key], str):
            return f"'{key}' is not a string"
    if data.get("declined") is True:
        return ""
    for key in ("projects", "provider", "endpoint", "model"):
        if key not in data:
            return f"'{key}' is missing"
    projects = data["projects"]
    if not isinstance(projects, list) or not all(isinstance(p, str) and p for p in projects):
        return "'projects' is not a list of project keys"
    return ""


def load_consent(path: Path) -> ConsentFile:
    """``consent.json`` at ``path``, validated (see :func:`consent_shape_problem`). Never raises.

    A missing file is no consent and no problem; a file that cannot be read,
    is not JSON, or has the wrong shape is no consent, with ``problem`` set.
    """
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ConsentFile(None)
    except IsADirectoryError:
        return ConsentFile(None, "a folder, not a file")
    except UnicodeDecodeError:
        return ConsentFile(None, "not UTF-8 text")
    except OSError as exc:
        return ConsentFile(None, f"unreadable ({exc.strerror or exc})")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return ConsentFile(None, f"not valid JSON ({exc})")
    except RecursionError:
        return ConsentFile(None, "not valid JSON (nested too deep)")
    problem = consent_shape_problem(data)
    return ConsentFile(None, problem) if problem else ConsentFile(data)


def write_consent(path: Path, record: dict[str, Any]) -> None:
    """Write ``record`` atomically: a partial file is never read, and of two writes at once the last stands whole.

    Raises :class:`ConsentUnwritable` (the file's path in ``details["file"]``)
    when the file or its folder cannot be written, with what to fix in the message.
    """
    # One temporary file per writer: two answers written at once (two tool calls, two
    # Hermes processes) must not replace or delete each other's half-written file.
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)  # left by a writer that died, or planted: created anew, never through a link
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(record, indent=2, ensure_ascii=False))
        tmp.replace(path)
    except OSError as exc:
        with suppress(OSError):
            if tmp.is_file():
                tmp.unlink()
        if path.is_dir():
            why = f"{path} is a folder, not a file: remove it (rm -r), then answer again"
        else:
            folder = next((f for f in (path.parent, *path.parent.parents) if os.path.lexists(f)), path.parent)
            if not folder.is_dir():
                why = f"{folder} is a file where the plugin's data folder should be: remove or rename it, then answer again"
            else:
                why = (f"the folder {folder} cannot be written ({exc.strerror or exc}): make it writable "
                       "(chmod u+w; chattr -i if it is immutable), then answer again")
        raise ConsentUnwritable(f"cannot record the answer in consent.json: {why}", file=str(path)) from None


def consent_matches(consent: dict[str, Any], spec: ProviderSpec) -> bool:
    """True when ``consent`` was given for this provider, endpoint and model (whatever its projects).

    The endpoint matches by its digest as configured (``endpoint_sha256``, see
    the module docstring); a record without one never matches.
    """
    fields = ("provider", "model", "endpoint", "endpoint_sha256")
    return tuple(consent.get(f) for f in fields) == (spec.provider, spec.model, spec.endpoint, spec.endpoint_sha256)


def consent_covers(consent: dict[str, Any] | None, spec: ProviderSpec, project_key: str | None = None) -> bool:
    """True when ``consent`` agreed to this provider, endpoint and model for this project (``None``: for some project)."""
    if not consent or consent.get("declined") or not consent_matches(consent, spec):
        return False
    projects = consent.get("projects") or []
    return bool(projects) if project_key is None else "*" in projects or project_key in projects
