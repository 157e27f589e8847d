"""What ``validate`` answers for a script, a flow or an item graph, built once for every front end:
the findings as JSON and as lines for people, and the verdict (``{"valid", "diagnostics"}``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rho_notebook.errors import InvalidWorkflow
from rho_notebook.planning.inputs import PASS_INPUT
from rho_notebook.planning.script_flows import CLI_FLOWS, FlowSpelling
from rho_notebook.service.wire import ValidateJson, validate_json

if TYPE_CHECKING:
    from rho_notebook.planning.plan import PlanRequest
    from rho_notebook.service.service import Service

__all__ = ["Checked", "FlowSpelling", "check_flow", "flows_spelled", "inputs_spelled"]


class _Finding(Protocol):
    @property
    def severity(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...

    def render(self) -> str: ...


@dataclass
class Checked:
    """The findings of one ``validate``, in the order they were found."""

    diagnostics: list[dict[str, Any]] = field(default_factory=list)
    """Each finding's JSON (file, line, column, rule, severity, message)."""
    lines: list[str] = field(default_factory=list)
    """Each finding as ``file:line:col: severity[rule]: message``."""

    @classmethod
    def of(cls, findings: Iterable[_Finding]) -> Checked:
        found = list(findings)
        return cls([f.to_json() for f in found], [f.render() for f in found])

    def add(self, findings: Iterable[_Finding]) -> None:
        """Add ``findings`` after those already found."""
        more = Checked.of(findings)
        self.diagnostics += more.diagnostics
        self.lines += more.lines

    def add_errors(self, err: InvalidWorkflow) -> None:
        """Add the diagnostics of ``err`` (inputs that do not fit, say) as errors."""
        for diagnostic in err.diagnostics():
            self.diagnostics.append({**diagnostic.to_json(), "severity": "error"})
            self.lines.append(diagnostic.render())

    @property
    def errors(self) -> int:
        return sum(1 for d in self.diagnostics if d.get("severity") == "error")

    @property
    def warnings(self) -> int:
        return len(self.diagnostics) - self.errors

    def to_json(self) -> ValidateJson:
        """``{"valid", "diagnostics"}``: what ``validate --output json`` prints and MCP answers."""
        return validate_json(self.diagnostics, valid=self.errors == 0)


async def check_flow(
    service: Service, path: Path, *, flow: str, request: Callable[[], PlanRequest]
) -> tuple[Checked, dict[str, Any]]:
    """``validate FILE.py --flow NAME`` for every front end: the module's lint findings and, when
    none is an error, the check of the flow compiled from ``request()`` (its findings, and its
    manifest, returned beside them; ``{}`` when it was not compiled). A module that does not plan or
    compile, or inputs that do not fit (``request`` may raise them), are errors among the findings."""
    checked = Checked.of(await service.lint_script(path, flow=flow))
    if checked.errors:
        return checked, {}
    try:
        check = await service.validate_flow(request())
    except InvalidWorkflow as err:
        checked.add_errors(err)
        return checked, {}
    checked.add(check.findings)
    return checked, check.manifest


def inputs_spelled(answer: Any, pass_input: str) -> Any:
    """A validate answer (``{"valid": false, "diagnostics": [...]}``; anything else is returned as
    it is) whose missing-input findings say to pass the input as ``pass_input`` (a format of
    ``{key}``: a front end that takes inputs otherwise than ``--input``) instead of ``--input``."""
    if not isinstance(answer, dict) or not isinstance(answer.get("diagnostics"), list):
        return answer
    spelled = []
    for found in answer["diagnostics"]:
        key = found.get("input") if isinstance(found, dict) else None
        said = PASS_INPUT.format(key=key)
        if isinstance(key, str) and str(found["message"]).endswith(said):
            found = {**found, "message": str(found["message"]).removesuffix(said) + pass_input.format(key=key)}
        spelled.append(found)
    return {**answer, "diagnostics": spelled}


_FLOW_RULES = ("flow.unnamed", "flow.name")
_CLI_FLAG = re.compile(rf"(?<![\w-]){re.escape(CLI_FLOWS.flag)}(?![\w-])")


def flows_spelled(answer: Any, spelling: FlowSpelling) -> Any:
    """A validate or plan answer (its ``diagnostics`` or ``warnings``; anything else is returned as
    it is) whose ``flow.unnamed`` and ``flow.name`` findings name a flow as ``spelling`` says (a
    front end that takes it otherwise than ``--flow``), by the flows each finding names."""
    if not isinstance(answer, dict):
        return answer
    spelled = dict(answer)
    for key in ("diagnostics", "warnings"):
        if isinstance(answer.get(key), list):
            spelled[key] = [_flow_spelled(found, spelling) for found in answer[key]]
    return spelled


def _flow_spelled(found: Any, spelling: FlowSpelling) -> Any:
    if not isinstance(found, dict) or found.get("rule") not in _FLOW_RULES:
        return found
    message, flows = str(found.get("message", "")), found.get("flows") or []
    said = CLI_FLOWS.passing(flows)
    if flows and message.endswith(said):
        message = message.removesuffix(said) + spelling.passing(flows)
    return {**found, "message": _CLI_FLAG.sub(lambda _: spelling.flag, message)}
