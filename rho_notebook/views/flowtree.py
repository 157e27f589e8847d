"""What the module-tree view of a flow shows: its compiled manifest as a tree, in text and HTML.

The manifest is the JSON data :func:`rho_notebook.flow.compile_manifest` gives and a flow plan keeps
(``plan.manifest.flow``): modules in depth-first pre-order, every ``AgentParam`` with its provider
placement (the credential *reference* only) and definition digest, and every ``Selector`` with the
candidates it chooses among at run time. Each module is one row, indented by its depth in the tree;
under it come its agents, then (for a selector) its candidates, then its child modules.

Pure functions of the manifest: the notebook shows the text as ``text/plain`` and the HTML as the
static view of the widget (:mod:`rho_notebook.widgets._flowtree`), which shows the same HTML live.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

__all__ = ["TreeRow", "flow_rows", "flow_tree_text", "flow_tree_html"]

_SHORT_DIGEST = 19
"""``sha256:`` and the first 12 hex digits: enough to tell two definitions apart at a glance."""


@dataclass(frozen=True)
class TreeRow:
    """One line of the tree."""

    depth: int
    kind: str
    """``module``, ``agent``, ``selector`` (a module that chooses at run time) or ``candidate``."""
    path: str
    """The module path (``review.research``), agent path (``review.writer``) or candidate path."""
    title: str
    """The class of a module or candidate; the attribute name of an agent."""
    facts: tuple[tuple[str, str], ...] = ()
    """(label, value) pairs shown after the title, in order."""


def _placement(agent: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    provider = agent.get("provider") or {}
    facts = [
        ("provider", str(provider.get("name") or "(default provider)")),
        ("model", str(provider.get("model") or "(default model)")),
    ]
    if provider.get("credential_ref"):
        facts.append(("credential", str(provider["credential_ref"])))
    facts.append(("definition", f"agent {agent['agent']}" if agent.get("agent") else "inline system prompt"))
    facts.append(("digest", str(agent.get("definition_digest") or "")))
    return tuple(facts)


def flow_rows(manifest: Mapping[str, Any]) -> list[TreeRow]:
    """The tree's rows, top to bottom."""
    modules = list(manifest.get("modules") or [])
    agents = {str(a["path"]): a for a in manifest.get("agents") or []}
    dynamic = {str(d["path"]): d for d in manifest.get("dynamic") or []}
    root = str(manifest.get("root") or "")
    rows: list[TreeRow] = []
    for module in modules:
        path = str(module["path"])
        depth = path.count(".") - root.count(".")
        chooser = dynamic.get(path)
        facts: tuple[tuple[str, str], ...] = ()
        if module.get("description"):
            facts = (("description", str(module["description"])),)
        rows.append(TreeRow(depth, "selector" if chooser else "module", path, str(module.get("class", "")), facts))
        for attribute in module.get("agents") or []:
            agent = agents.get(f"{path}.{attribute}")
            if agent is not None:
                rows.append(TreeRow(depth + 1, "agent", str(agent["path"]), str(attribute), _placement(agent)))
        if chooser is not None:
            for number, candidate in enumerate(chooser.get("candidates") or [], start=1):
                where = str(candidate.get("path") or "(not in the tree)")
                facts = (("choice", str(number)), ("description", str(candidate.get("description") or "")))
                rows.append(TreeRow(depth + 1, "candidate", where, str(candidate.get("class", "")), facts))
    return rows


def _counts(manifest: Mapping[str, Any]) -> str:
    def count(key: str, noun: str) -> str:
        n = len(manifest.get(key) or [])
        return f"{n} {noun}{'' if n == 1 else 's'}"

    return f"{count('modules', 'module')}, {count('agents', 'agent')}, {count('dynamic', 'selector')}"


def _fact_text(label: str, value: str) -> str:
    if label == "digest":
        return value[:_SHORT_DIGEST]
    if label == "description":
        return f'"{value}"'
    return f"{label} {value}"


def _head(row: TreeRow) -> str:
    if row.kind == "agent":
        return f"agent {row.title}"
    if row.kind == "candidate":
        return f"-> {row.path} ({row.title})"
    chooses = " (chooses at run time)" if row.kind == "selector" else ""
    return f"{row.path.rsplit('.', 1)[-1]}  {row.title}{chooses}"


def flow_tree_text(manifest: Mapping[str, Any]) -> str:
    """The tree as plain text, one row per line (what ``text/plain`` shows)."""
    lines = [f"flow {manifest.get('root', '')}: {_counts(manifest)}"]
    for row in flow_rows(manifest):
        facts = [_fact_text(label, value) for label, value in row.facts if label != "definition"]
        facts += [f"({value})" for label, value in row.facts if label == "definition"]
        lines.append("  " * (row.depth + 1) + "  ".join([_head(row), *facts]))
    return "\n".join(lines)


_ROW = "margin:1px 0;padding-left:{indent}px;font-family:monospace;font-size:12px"
_TAG = (
    "display:inline-block;border-radius:3px;padding:0 4px;margin-right:4px;font-size:11px;color:#fff;background:{color}"
)
_COLORS = {"module": "#475569", "selector": "#a16207", "agent": "#2563eb", "candidate": "#6b7280"}


def flow_tree_html(manifest: Mapping[str, Any]) -> str:
    """The tree as self-contained HTML (the widget's value and its static view)."""
    parts = [
        '<div class="rho-flow-tree" style="font-family:sans-serif;font-size:13px">',
        f"<div><b>Flow</b> <code>{escape(str(manifest.get('root', '')))}</code> · {escape(_counts(manifest))}</div>",
    ]
    for row in flow_rows(manifest):
        tag = f'<span style="{_TAG.format(color=_COLORS[row.kind])}">{escape(row.kind)}</span>'
        name = row.title if row.kind == "agent" else row.path
        title = "" if row.kind == "agent" else f" <i>{escape(row.title)}</i>"
        facts = []
        for label, value in row.facts:
            if label == "digest":
                facts.append(f'<code title="{escape(value)}">{escape(value[:_SHORT_DIGEST])}</code>')
            else:
                facts.append(f"{escape(label)} <b>{escape(value)}</b>")
        attributes = f'data-kind="{row.kind}" data-path="{escape(row.path)}"'
        parts.append(
            f'<div class="rho-flow-row" {attributes} style="{_ROW.format(indent=16 * row.depth)}">'
            f"{tag}<b>{escape(name)}</b>{title}" + (" · " + " · ".join(facts) if facts else "") + "</div>"
        )
    parts.append("</div>")
    return "".join(parts)
