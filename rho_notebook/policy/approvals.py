"""Approval requests and decisions, as durable files in a run's private ``requests/`` folder.

The owner writes ``approval-<ID>.json`` (what is being decided: an approval node's rendered
prompt, or the exact frozen process facts of a supervised launch) and journals it. A decider — the
notebook widget, the foreground terminal prompt, ``%workflow approve`` or ``rho-notebook approve``
in another process — writes ``approval-<ID>.decision.json`` with O_EXCL, so the first decision
wins and can never be overwritten, then pokes the owner. The owner journals the decision with who,
when and exactly what was decided. If the owner is gone, the request and any decision made
meanwhile stay on disk and resume continues from them.

Nothing here lets a workflow or an agent decide: deciders refuse to run inside a run's own
process tree (``RHO_RUN_ID`` set, or the owner an ancestor).
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from rho_notebook.errors import AlreadyDecided, ApprovalRefused, StoreError
from rho_notebook.model.base import FrozenModel
from rho_notebook.oshelpers import ancestors
from rho_notebook.store.files import (
    atomic_write_json,
    check_entry,
    ensure_private_dir,
    fsync_dir,
    list_dir,
    read_nofollow,
)

__all__ = [
    "ApprovalRequest",
    "ApprovalDecision",
    "write_request",
    "read_request",
    "list_requests",
    "write_decision",
    "record_decision",
    "already_decided",
    "read_decision",
    "who_am_i",
    "check_decider",
    "facts_digest",
    "describe_request",
]


class ApprovalRequest(FrozenModel):
    request_id: str
    run_id: str
    node: str
    attempt: int
    kind: Literal["node", "launch", "form"]
    """``node``: an approval node; ``launch``: a supervised command or shell launch; ``form``: an
    item graph's human step (``facts["form"]`` holds its typed fields; answered with values)."""
    facts: dict[str, Any]
    """Exactly what is being decided (prompt text, or executable/digest/argv/cwd)."""
    facts_sha256: str
    requested_at: float

    def record_fields(self) -> dict[str, Any]:
        """The fields of this request's ``approval_requested`` journal record (the owner journals
        them; a follower that rejoins a resumed run shows them again the same way)."""
        return {
            "node": self.node,
            "attempt": self.attempt,
            "request_id": self.request_id,
            "approval": self.kind,
            "facts": self.facts,
            "facts_sha256": self.facts_sha256,
        }


class ApprovalDecision(FrozenModel):
    request_id: str
    decision: Literal["approve", "deny"]
    by: str
    comment: str | None = None
    at: str
    via: str
    """cli, terminal, notebook, server."""
    facts_sha256: str
    """The digest of the facts the decider was shown; must match the request's."""
    answer: dict[str, Any] | None = None
    """A ``form`` request's answer: the values of its fields, checked against their types."""


def facts_digest(facts: dict[str, Any]) -> str:
    encoded = json.dumps(facts, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def who_am_i() -> str:
    """The OS account of this process."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def _request_path(folder: Path, request_id: str) -> Path:
    return folder / f"approval-{request_id}.json"


def _decision_path(folder: Path, request_id: str) -> Path:
    return folder / f"approval-{request_id}.decision.json"


def _folder(folder: Path) -> Path:
    """The run's requests folder, as the store checks it (no link, a directory: see
    :func:`~rho_notebook.store.files.check_entry`), created when it is missing."""
    if check_entry(folder, below=folder.parent, kind="dir") is None:
        ensure_private_dir(folder, below=folder.parent)
    return folder


def _read(path: Path) -> bytes | None:
    """A request or decision file's bytes, None when it does not exist (checked, no-follow)."""
    if check_entry(path, below=path.parent.parent, kind="file") is None:
        return None
    try:
        return read_nofollow(path)
    except FileNotFoundError:
        return None


def write_request(folder: Path, request: ApprovalRequest) -> None:
    atomic_write_json(_request_path(_folder(folder), request.request_id), request.model_dump(mode="json"))


def read_request(folder: Path, request_id: str) -> ApprovalRequest:
    path = _request_path(folder, request_id)
    data = _read(path)
    if data is None:
        msg = f"no approval request {request_id!r} in this run"
        raise ApprovalRefused(msg)
    try:
        return ApprovalRequest.model_validate_json(data)
    except ValidationError:
        msg = f"approval request {path} cannot be read; the run's store is damaged"
        raise StoreError(msg) from None


def list_requests(folder: Path) -> list[ApprovalRequest]:
    found = []
    for name in sorted(list_dir(folder, below=folder.parent)):
        if name.startswith("approval-") and name.endswith(".json") and not name.endswith(".decision.json"):
            found.append(read_request(folder, name[len("approval-") : -len(".json")]))
    return found


def read_decision(folder: Path, request_id: str) -> ApprovalDecision | None:
    path = _decision_path(folder, request_id)
    data = _read(path)
    if not data:
        return None
    try:
        return ApprovalDecision.model_validate_json(data)
    except ValidationError:
        msg = f"approval decision {path} cannot be read; the run's store is damaged"
        raise StoreError(msg) from None


def write_decision(folder: Path, decision: ApprovalDecision) -> ApprovalDecision:
    """Record ``decision`` unless one exists; returns the decision that stands."""
    path = _decision_path(_folder(folder), decision.request_id)
    payload = decision.model_dump_json().encode()
    # a name of its own per call: two threads of one process (a widget and the server) may race
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, payload)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # atomic create-if-absent: the first decision wins
    except FileExistsError:
        os.unlink(tmp)
        existing = read_decision(folder, decision.request_id)
        if existing is None:
            raise StoreError(f"approval decision file {path} is unreadable") from None
        return existing
    os.unlink(tmp)
    fsync_dir(folder)
    return decision


def record_decision(folder: Path, request: ApprovalRequest, decision: ApprovalDecision) -> ApprovalDecision:
    """Record ``decision`` on ``request`` if it is the first.

    Raises
    ------
    AlreadyDecided
        Another decision stands (also when it is identical to this one: only the caller whose
        decision was written is told that it decided).
    """
    standing = write_decision(folder, decision)
    if standing is not decision:
        raise already_decided(request, standing)
    return standing


def already_decided(request: ApprovalRequest, standing: ApprovalDecision) -> AlreadyDecided:
    """The error naming who decided ``request``, when and how: one wording for every front end."""
    who = f"by {standing.by} at {standing.at} via {standing.via}"
    if request.kind == "form":
        step = request.facts.get("step", request.node)
        shown = "declined" if standing.answer is None else f"answered {json.dumps(standing.answer, sort_keys=True)}"
        msg = f"step {step} of run {request.run_id} was already {shown} {who}; your answer was not recorded"
    else:
        msg = (
            f"request {request.request_id} of run {request.run_id} was already decided: {standing.decision} {who}; "
            "your decision was not recorded"
        )
    return AlreadyDecided(msg, standing=standing.model_dump())


def check_decider(*, run_id: str, owner_pid: int | None) -> None:
    """Refuse to decide from inside a run's own process tree."""
    inside = os.environ.get("RHO_RUN_ID")
    if inside:
        msg = f"refusing to decide approvals from inside a workflow run (RHO_RUN_ID={inside}); a person must decide from outside the run"
        raise ApprovalRefused(msg)
    if owner_pid is not None and owner_pid in ancestors(os.getpid()):
        msg = f"refusing to decide approvals of run {run_id} from a process started by its owner (pid {owner_pid})"
        raise ApprovalRefused(msg)


def describe_request(
    request: ApprovalRequest, *, answer_with: str = "rho-notebook answer RUN STEP FIELD=VALUE..."
) -> str:
    """Exactly what a decision on ``request`` decides, for people (a form names ``answer_with``, the
    front end's own way to answer it)."""
    lines = [f"run {request.run_id}  node {request.node}  attempt {request.attempt}  request {request.request_id}"]
    facts = request.facts
    if request.kind == "node":
        lines.append("approval node; its prompt:")
        lines.extend(f"  | {line}" for line in str(facts.get("prompt", "")).splitlines() or [""])
    elif request.kind == "form":
        lines.append(f"human step {facts.get('step', request.node)} asks:")
        lines.extend(f"  | {line}" for line in str(facts.get("prompt", "")).splitlines() or [""])
        lines.append(f"its form (answer with {answer_with}):")
        for name, decl in (facts.get("form") or {}).items():
            kind = decl.get("type")
            if kind == "enum":
                kind += " " + json.dumps(decl.get("choices"))
            need = "required" if decl.get("required") else f"default {json.dumps(decl.get('default'))}"
            lines.append(f"  {name:<12} {kind}, {need}" + (f"  ({decl['label']})" if decl.get("label") != name else ""))
    elif "agent" in facts:
        lines.append("supervised launch of a mutating agent:")
        lines.append(
            f"  agent       {facts.get('agent')} ({facts.get('runtime')}), tools: {json.dumps(facts.get('tools'))}, access: {facts.get('access')}"
        )
        lines.append("  prompt:")
        lines.extend(f"  | {line}" for line in str(facts.get("prompt", "")).splitlines() or [""])
    else:
        lines.append("supervised launch of a frozen process:")
        lines.append(f"  executable  {facts.get('executable')}  {facts.get('sha256')}")
        for interp in facts.get("interpreters", []):
            lines.append(f"  interpreter {interp['path']}  {interp['sha256']}")
        lines.append(f"  argv        {json.dumps(facts.get('argv'))}")
        lines.append(f"  cwd         {facts.get('cwd')}")
    lines.append(f"facts digest  {request.facts_sha256}")
    return "\n".join(lines)
