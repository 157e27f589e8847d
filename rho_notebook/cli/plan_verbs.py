"""The ``validate`` and ``plan`` verbs (``plans`` lists what they stored: :mod:`.read_verbs`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from rho_notebook.cli._args import EXIT_USAGE
from rho_notebook.errors import InvalidWorkflow
from rho_notebook.model.graph import placement_of, resources_of
from rho_notebook.model.plan import Plan
from rho_notebook.service import PlanRequest, Service, load_limits, parse_input_args
from rho_notebook.service.checks import check_flow
from rho_notebook.service.sync import run_sync
from rho_notebook.service.wire import invalid_json, plan_summary_json, validate_json

__all__ = ["run_validate", "run_plan"]


def _print_text(plan: Plan, *, stored: bool) -> None:
    m = plan.manifest
    out = sys.stdout
    if stored:
        print(f"plan        {m.plan_id}", file=out)
    print(f"workflow    {m.workflow}", file=out)
    print(f"digest      {m.graph_digest}", file=out)
    print(f"workspace   {m.workspace_root}{'' if m.workspace_trusted else '  (untrusted)'}", file=out)
    for line in _shape_lines(plan):
        print(line, file=out)
    print("inputs", file=out)
    for key, value in m.inputs.items() or []:
        print(f"  {key} = {json.dumps(value)}", file=out)
    if not m.inputs:
        print("  (none)", file=out)
    print("sources", file=out)
    for source in m.sources:
        print(f"  {source.label}  {source.size} bytes  {source.sha256}", file=out)
    print("authority", file=out)
    for item in m.authority:
        print(f"  {item.kind:<12} {item.value}  {item.detail}", file=out)
    for line in _placement_lines(plan):
        print(line, file=out)


def _shape_lines(plan: Plan) -> list[str]:
    """What the plan runs: a flow's module tree, a script's module, or a graph's size."""
    script = plan.graph.script
    if script is not None and script.flow is not None:
        head = f"flow        {script.flow} of {script.module}  (model calls become nodes)"
        return [head, *(f"  {line}" for line in _manifest_lines(plan.manifest.flow or {}))]
    if script is not None:
        return [f"script      {script.module}  (steps become nodes while it runs)"]
    return [f"nodes       {len(plan.graph.nodes)} ({plan.graph.edge_count()} edges)"]


def _placement_lines(plan: Plan) -> list[str]:
    """The scheduler's limits, a shared checkout, and where nodes placed or sized run."""
    sched = plan.graph.scheduler
    lines = [
        f"limits      total={sched.total} agent={sched.agent} command={sched.command} "
        f"checkout_readers={sched.checkout_readers}"
    ]
    if plan.graph.checkout == "shared":
        lines.append("checkout    shared  (each worker has its own copy; no cross-host checkout lock)")
    for node in plan.graph.nodes:
        if placement_of(node) == "local" or resources_of(node):
            wants = ", ".join(f"{key}={amount}" for key, amount in resources_of(node).items())
            lines.append(f"placement   {node.name}: {placement_of(node)}{f'  resources {wants}' if wants else ''}")
    return lines


def print_script_warnings(service: Service, path: Path, *, flow: str | None) -> int:
    """The lint warnings of a script or flow module on stderr (its errors stop the plan): how many."""
    warnings = [finding for finding in run_sync(service.lint_script(path, flow=flow)) if finding.severity == "warning"]
    for finding in warnings:
        print(finding.render(), file=sys.stderr)
    return len(warnings)


def _verdict(file: Path, *, flow: str | None, errors: int, warnings: int) -> str:
    """``validate``'s last line for a script or flow module (``plan`` and ``run`` say the invalid one too)."""
    counts = f"{errors} error{'s' * (errors != 1)}, {warnings} warning{'s' * (warnings != 1)}"
    if errors:
        return f"invalid: {f'flow {flow} of ' if flow else ''}{file} ({counts}); nothing was stored"
    if flow:
        return f"valid: flow {flow} of {file} passes validate ({counts}; nothing was stored)"
    return f"valid: the script {file} passes validate ({counts}; nothing was stored)"


def print_script_invalid(err: InvalidWorkflow, file: Path, *, flow: str | None, warnings: int) -> int:
    """A script or flow module that ``plan`` or ``run`` refused, said as ``validate`` says it: its
    findings on stderr, then the ``invalid: ...`` line; the exit status."""
    for found in err.diagnostics():
        print(found.render(), file=sys.stderr)
    print(_verdict(file, flow=flow, errors=len(err.diagnostics()), warnings=warnings))
    return err.exit_code


def _notebook_plan(service: Service, args: argparse.Namespace, inputs: dict[str, Any], *, store: bool) -> Plan:
    """``validate``/``plan NOTEBOOK.ipynb [--workflow NAME]``: the cell's workflow, planned as
    ``run NOTEBOOK.ipynb`` plans it (Python nodes frozen with the notebook kernel's interpreter)."""
    from rho_notebook.service.kernel_python import notebook_interpreter

    interpreter = notebook_interpreter(args.file)
    plan = run_sync(
        service.plan_notebook(
            args.file,
            workflow=args.workflow,
            inputs=inputs,
            where=str(args.file),
            python_interpreter=interpreter.path,
            store=store,
        )
    )
    if plan.graph.python is not None:  # the workflow has Python nodes: say what they run with
        print(interpreter, file=sys.stdout if args.output == "text" else sys.stderr)
    return plan


def _run(args: argparse.Namespace, *, store: bool) -> int:
    service = Service.default()
    inputs = parse_input_args(args.input, limits=load_limits())
    if args.workflow is not None and args.file.suffix != ".ipynb":
        print(f"rho-notebook: --workflow applies to a NOTEBOOK.ipynb, not to {args.file}", file=sys.stderr)
        return EXIT_USAGE
    if args.file.suffix == ".ipynb":
        plan = _notebook_plan(service, args, inputs, store=store)
    else:
        flow, warnings = getattr(args, "flow", None), 0
        try:
            request = service.request_for(args.file, inputs=inputs, flow=flow)
            if args.file.suffix == ".py":
                warnings = print_script_warnings(service, args.file, flow=flow)
            plan = run_sync(service.plan(request) if store else service.validate(request))
        except InvalidWorkflow as err:
            if args.file.suffix != ".py" or args.output != "text":
                raise
            return print_script_invalid(err, args.file, flow=flow, warnings=warnings)
    if args.output == "json":
        print(json.dumps(plan_summary_json(plan, stored=store), indent=2))
    else:
        _print_text(plan, stored=store)
        if not store:
            print("valid: the workflow validates (nothing was stored)")
        else:
            print(f"\nrun it with: rho-notebook run {plan.plan_id[:13]}")
    return 0


def _validate_script(args: argparse.Namespace) -> int:
    """``validate SCRIPT.py``: the script's lint findings (never imported); with ``--input``, the
    values are checked against ``INPUTS`` too (as ``plan`` would); exit 1 on an error."""
    service = Service.default()
    inputs = parse_input_args(args.input, limits=load_limits()) if args.input else None
    checked = run_sync(service.check_script(args.file, inputs=inputs))
    errors, warnings = checked.errors, checked.warnings
    if args.output == "json":
        print(json.dumps(checked.to_json(), indent=2))
        return 1 if errors else 0
    for line in checked.lines:
        print(line, file=sys.stderr)
    print(_verdict(args.file, flow=getattr(args, "flow", None), errors=errors, warnings=warnings))
    return 1 if errors else 0


def _manifest_lines(manifest: dict[str, Any]) -> list[str]:
    """The module tree of a flow manifest (docs/flows.md): each module, its agents with provider
    and model, and each selector with its candidates (text for ``validate --flow``/``plan --flow``)."""
    agents = {a.get("path"): a for a in manifest.get("agents") or [] if isinstance(a, dict)}
    selectors = {d.get("path"): d for d in manifest.get("dynamic") or [] if isinstance(d, dict)}
    lines: list[str] = []
    for module in manifest.get("modules") or []:
        if not isinstance(module, dict):
            continue
        path = str(module.get("path", ""))
        depth = path.count(".")
        lines.append(f"{'  ' * depth}{path}  ({module.get('class')})")
        for attribute in module.get("agents") or []:
            agent = agents.get(f"{path}.{attribute}") or {}
            snapshot = agent.get("provider")
            placed: dict[str, Any] = snapshot if isinstance(snapshot, dict) else {}
            what = f"agent {agent['agent']}" if agent.get("agent") else "inline prompt"
            provider = placed.get("name") or "(default provider)"
            model = placed.get("model") or "(default model)"
            lines.append(f"{'  ' * (depth + 1)}{attribute}: {what}  provider={provider}  model={model}")
        selector = selectors.get(path)
        if selector is not None:
            names = [
                str(c.get("path") or c.get("class")) for c in selector.get("candidates") or [] if isinstance(c, dict)
            ]
            shown = ", ".join(names) or "given when it runs"
            lines.append(f"{'  ' * (depth + 1)}selector (dynamic): candidates {shown}")
    return lines


def _validate_flow(args: argparse.Namespace) -> int:
    """``validate FLOW.py --flow NAME``: lint the module, compile the workflow (its top-level code
    runs in the frozen interpreter; no model is called) and check the manifest; exit 1 on an error."""
    service = Service.default()

    def request() -> PlanRequest:
        inputs = parse_input_args(args.input, limits=load_limits())
        return service.request_for(args.file, inputs=inputs, flow=args.flow)

    checked, manifest = run_sync(check_flow(service, args.file, flow=args.flow, request=request))
    errors, warnings = checked.errors, checked.warnings
    if args.output == "json":
        answer = validate_json(checked.diagnostics, valid=errors == 0, flow=args.flow, manifest=manifest)
        print(json.dumps(answer, indent=2))
        return 1 if errors else 0
    for line in checked.lines:
        print(line, file=sys.stderr)
    if manifest:
        print(f"flow {args.flow} of {args.file}")
        for line in _manifest_lines(manifest):
            print(f"  {line}")
    print(_verdict(args.file, flow=args.flow, errors=errors, warnings=warnings))
    return 1 if errors else 0


def run_validate(args: argparse.Namespace) -> int:
    from rho_notebook.cli.graph_verbs import validate_graph  # item graphs: validation only (docs/graphs.md)
    from rho_notebook.model.itemgraph import is_graph_file

    if is_graph_file(args.file.name):
        return validate_graph(args)
    if args.file.suffix == ".py" and getattr(args, "flow", None):
        return _validate_flow(args)
    if args.file.suffix == ".py":
        return _validate_script(args)
    try:
        return _run(args, store=False)
    except InvalidWorkflow as err:
        if args.output == "json":
            print(json.dumps(invalid_json(err), indent=2))
        raise


def run_plan(args: argparse.Namespace) -> int:
    try:
        return _run(args, store=True)
    except InvalidWorkflow as err:
        if args.output == "json":
            print(json.dumps(invalid_json(err), indent=2))
        raise
