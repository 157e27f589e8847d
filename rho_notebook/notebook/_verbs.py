"""The ``%workflow VERB`` line magic: one method per verb, over the notebook's session.

:class:`WorkflowVerbs` is composed into :class:`rho_notebook.notebook.magics.WorkflowMagics`,
which parses nothing itself: :meth:`WorkflowVerbs.dispatch` parses the line with the magics'
parser (:mod:`rho_notebook.service.cell_args`, whose run and resume flags are the CLI's,
:mod:`rho_notebook.service.flags`) and calls ``_verb_<VERB>``. ``{expr}`` and ``$name`` in an
argument that holds a run, plan or request ID are expanded in the user namespace.
"""

from __future__ import annotations

import json
import queue
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.utils.text import DollarFormatter

from rho_notebook.errors import ArgumentError, InvalidWorkflow, NotFound, RhoError
from rho_notebook.model.plan import Plan
from rho_notebook.model.state import Lifecycle
from rho_notebook.notebook import api
from rho_notebook.notebook._render import (
    Progress,
    Report,
    graph_report,
    input_flags,
    plan_report,
    plans_report,
    runs_report,
    script_report,
    status_report,
    workflow_report,
)
from rho_notebook.notebook._usage import diagnostics_text, usage_error
from rho_notebook.notebook.display import (
    show_flow_tree,
    show_graph,
    show_hub,
    show_item_graph,
    show_plan_card,
    show_run,
)
from rho_notebook.notebook.session import NotebookSession
from rho_notebook.service import RunHandle, RunsQuery, Service, describe_request, load_limits, parse_input_args
from rho_notebook.service.cell_args import parse_verb
from rho_notebook.service.cells import FlowCell, GraphCell, ScriptCell, WorkflowCell
from rho_notebook.service.export import export_cells
from rho_notebook.service.flags import json_value, parse_budgets, parse_decisions
from rho_notebook.service.wire import diff_json, plan_json, plan_summary_json, status_json, validate_json
from rho_notebook.views.run_notes import cancel_text
from rho_notebook.views.text import silent_node_line

__all__ = ["WorkflowVerbs", "hold_graph"]

_FILE_SUFFIXES = (".star", ".py", ".graph.yaml")
"""What a workflow file's name ends with (``validate``/``plan``/``run`` TARGET that is no cell)."""

_ID_ARGUMENTS = ("run", "request")
"""The verb arguments that hold a run or request ID (``run``'s ``target`` holds a plan ID or a name)."""


def _approval_timeout(args: Any) -> float | None:
    """``--approval-timeout S`` in a cell: how long a supervised launch waits while no notebook or
    terminal that can answer follows the run (the kernel was restarted); 0, the flag's default,
    keeps a notebook's meaning: as long as the node allows, since the person may come back."""
    seconds = float(args.approval_timeout)
    return seconds if seconds > 0 else None


def _budget_args(args: Any) -> dict[str, Any]:
    """``--max-tokens/--max-cost/--max-wall`` as :func:`api.run`'s keywords (docs/usage.md#budgets)."""
    return {"max_tokens": args.max_tokens, "max_cost": args.max_cost, "max_wall": args.max_wall}


def _budget_flags(budget: dict[str, Any]) -> list[str]:
    """:func:`_budget_args`'s keywords given back as the flags that set them (a retry line)."""
    return [f"--{name.replace('_', '-')} {value}" for name, value in budget.items() if value is not None]


def _raises(args: Any) -> dict[str, float]:
    """``--raise-budget [NODE:]tokens=N|cost=USD|wall=S`` as :func:`api.resume`'s ``raise_budget``;
    ``resume --max-tokens/--max-cost/--max-wall`` set the run's limits as the CLI's resume does."""
    given: dict[str, float] = {}
    for unit, flag in (("tokens", "max_tokens"), ("cost", "max_cost"), ("wall", "max_wall")):
        if getattr(args, flag, None) is not None:
            given[unit] = float(getattr(args, flag))
    parse_budgets(raises=args.raise_budget)  # the CLI's rule and words for a value that is no limit
    for item in args.raise_budget:
        key, _, value = item.partition("=")
        given[key] = float(value)
    return given


def _kind(cell: ScriptCell) -> str:
    """How a message names a ``%%script`` or ``%%flow`` cell."""
    return "flow" if isinstance(cell, FlowCell) else "script"


def hold_graph(session: NotebookSession, cell: GraphCell, *, show: bool = True) -> Report:
    """Hold and validate a ``%%graph`` cell: its summary (and, with ``show``, its drawing), or a
    UsageError naming every problem."""
    try:
        graph = session.define_graph(cell)
    except InvalidWorkflow as err:
        raise UsageError(diagnostics_text(err, what=f"%%graph {cell.name} ({cell.display})")) from None
    except RhoError as err:
        raise usage_error(err) from None
    if show:
        show_item_graph(graph)
    return graph_report(graph, cell, label=session.entry_label(cell.name, suffix=".graph.yaml"))


class WorkflowVerbs:
    """The verbs of ``%workflow``; ``shell`` is IPython's (its user namespace expands IDs)."""

    def __init__(self, shell: Any, *, session: NotebookSession) -> None:
        self.shell = shell
        self.session = session

    def dispatch(self, line: str) -> Any:
        """Parse ``%workflow VERB ARGS`` and run the verb (IDs expanded in the user namespace)."""
        args = parse_verb(line)
        for name in (*_ID_ARGUMENTS, "target") if args.verb == "run" else _ID_ARGUMENTS:
            value = getattr(args, name, None)
            if isinstance(value, str):
                setattr(args, name, self._expand_id(value))
        handler = getattr(self, "_verb_" + args.verb.replace("-", "_"))
        return handler(args)

    def _expand_id(self, value: str) -> str:
        """``{expr}`` and ``$name`` in an ID argument, evaluated in the user namespace (IPython's
        rules, as for magics without ``@no_var_expand``; ``$$`` and ``{{`` escape)."""
        if "{" not in value and "$" not in value:
            return value
        if self.shell is None:  # pragma: no cover - magics are registered with a shell
            raise RuntimeError("the %workflow magic has no shell")
        try:
            return str(DollarFormatter().vformat(value, args=[], kwargs=self.shell.user_ns))
        except Exception as err:  # the user's expression failed: say which, without a traceback
            msg = f"cannot expand {value!r} in the notebook's namespace: {type(err).__name__}: {err}"
            raise UsageError(msg) from None

    def _inputs(self, raw: list[str]) -> dict[str, Any]:
        """``--input KEY=JSON`` values; a malformed one is the flag's mistake (as on a cell's magic
        line), not an invalid workflow."""
        try:
            return parse_input_args(raw, limits=load_limits())
        except InvalidWorkflow as err:
            raise UsageError("\n".join(d.message for d in err.diagnostics())) from None

    def _target(
        self, target: str, raw_inputs: list[str], *, store: bool, flow: str | None = None, retry: str | None = None
    ) -> tuple[Plan, WorkflowCell | None]:
        """Validate (or with ``store`` plan) ``target``; ``retry`` is the line that passes a missing
        required input (default: ``%workflow plan|validate TARGET`` with the inputs given)."""
        inputs = self._inputs(raw_inputs)
        if flow is not None and self.session.has(target):
            msg = f"--flow applies to a FLOW.py file; {target} is a cell of this notebook (a %%flow cell names its flow on its magic line)"
            raise UsageError(msg)
        if retry is None:
            retry = " ".join([f"%workflow {'plan' if store else 'validate'} {target}", *input_flags(raw_inputs)])
        if target in self.session.cells.scripts or target in self.session.cells.graphs:
            source = self.session.source(target)
            kind = "graph" if target in self.session.cells.graphs else _kind(self.session.cells.scripts[target])
            try:
                plan = api.plan(source, inputs=inputs) if store else api.validate(source, inputs=inputs)
            except InvalidWorkflow as err:
                raise UsageError(diagnostics_text(err, what=f"{kind} {target}", retry=retry)) from None
            (self.session.planned if store else self.session.validated)[target] = plan
            return plan, None
        if target in self.session.cells.workflows:
            source = self.session.source(target)
            what = f"workflow {target}"
            try:
                plan = api.plan(source, inputs=inputs) if store else api.validate(source, inputs=inputs)
            except InvalidWorkflow as err:
                raise UsageError(diagnostics_text(err, what=what, retry=retry)) from None
            if store:
                self.session.planned[target] = plan
            else:
                self.session.validated[target] = plan
            return plan, self.session.cells.workflows[target]
        return self._file_target(target, inputs, store=store, flow=flow), None

    def _file_target(self, target: str, inputs: dict[str, Any], *, store: bool, flow: str | None) -> Plan:
        """A TARGET that is no cell of this notebook: a workflow file, validated or planned."""
        path = Path(target)
        if target.endswith(".ipynb"):  # planning reads a saved notebook only from the command line
            verb = "plan" if store else "validate"
            msg = f"%workflow {verb} takes a workflow of this notebook or a workflow file, not a saved notebook; in a terminal: rho-notebook {verb} {target}"
            raise UsageError(msg)
        if target.endswith(_FILE_SUFFIXES) or path.is_file():  # a missing file: planning says so
            try:
                return (
                    api.plan(path, inputs=inputs, flow=flow) if store else api.validate(path, inputs=inputs, flow=flow)
                )
            except InvalidWorkflow as err:
                raise UsageError(diagnostics_text(err, what=target)) from None
        known = self.session.cells.names_text(target, none="none yet")
        raise UsageError(
            f"{target!r} is neither a %%workflow of this notebook ({known}) nor a workflow file "
            "(FILE.star, SCRIPT.py or FILE.graph.yaml)"
        )

    def _json_summary(self, plan: Plan, *, stored: bool) -> None:
        print(json.dumps(plan_summary_json(plan, stored=stored), indent=2))

    def _verb_validate(self, args: Any) -> Report | None:
        graph = self.session.graph_cell(args.target)
        if graph is not None:
            if args.input or args.flow is not None:
                raise UsageError(
                    f"%workflow validate {args.target}: a %%graph cell takes no --input or --flow (its document declares its inputs)"
                )
            report = hold_graph(self.session, graph, show=args.output != "json")  # json: the JSON alone
            if args.output == "json":
                print(json.dumps(validate_json([], valid=True, graph=args.target), indent=2))
                return None
            return report
        plan, cell = self._target(args.target, args.input, store=False, flow=args.flow)
        if args.output == "json":
            self._json_summary(plan, stored=False)
            return None
        if plan.manifest.flow is not None:  # a flow: its module tree (its steps appear while it runs)
            show_flow_tree(plan.manifest.flow)
        script = self.session.cells.scripts.get(args.target)
        if script is not None:
            label = self.session.entry_label(script.name, suffix=".py")
            return script_report(plan, script, label=label, inputs=args.input)
        if plan.graph.script is None:
            show_graph(plan)
        return workflow_report(plan, cell, inputs=args.input)

    def _verb_plan(self, args: Any) -> Report | None:
        plan, _ = self._target(args.target, args.input, store=True, flow=args.flow)
        if args.output == "json":
            self._json_summary(plan, stored=True)
            return None
        if plan.graph.script is None:  # a script's steps appear while it runs: no graph to draw yet
            show_graph(plan)
        return plan_report(plan)

    def _plan_for_run(self, args: Any) -> Plan:
        if self.session.has(args.target) or args.flow is not None:
            retry = " ".join(
                [f"%workflow run {args.target}", *input_flags(args.input), *(["--yes"] if args.yes else [])]
            )
            plan, _ = self._target(args.target, args.input, store=True, flow=args.flow, retry=retry)
            return plan
        if args.input:
            raise UsageError(
                f"--input applies when `run` plans a %%workflow of this notebook; plan {args.target} is frozen with its inputs"
            )
        try:
            return api.call(api.service().load_plan(args.target))
        except NotFound:
            known = self.session.cells.names_text(args.target, none="none yet")
            raise UsageError(
                f"{args.target!r} is neither a %%workflow of this notebook ({known}) nor a plan ID; list plans with %workflow plans"
            ) from None

    def _verb_run(self, args: Any) -> Any:
        previous = self.session.planned.get(args.target)
        plan = self._plan_for_run(args)
        print(f"plan {plan.plan_id}  workflow {plan.graph.name}  digest {plan.graph_digest}")
        if not args.yes:

            def on_run() -> RunHandle:
                return api.run(
                    plan,
                    confirm_digest=plan.graph_digest,
                    mode=args.mode,
                    approval_timeout=_approval_timeout(args),
                    reuse=not args.no_reuse,
                    executor=args.executor,
                    **_budget_args(args),
                )

            changed = previous is not None and previous.graph_digest != plan.graph_digest
            changes = api.call(api.service().diff_plans(previous, plan)) if previous is not None and changed else None
            show_plan_card(plan, on_run=on_run, changes=changes)
            return None
        handle = api.run(
            plan,
            yes=True,
            mode=args.mode,
            approval_timeout=_approval_timeout(args),
            reuse=not args.no_reuse,
            executor=args.executor,
            **_budget_args(args),
        )
        return self._started(handle, args)

    def _verb_diff(self, args: Any) -> Report | None:
        result = api.call(api.service().diff(self._expand_id(args.old), self._expand_id(args.new)))
        if args.output == "json":
            print(json.dumps(diff_json(result), indent=2))
            return None
        return Report("\n".join(result.lines()), data=result)

    def _try_workflow(self, args: Any) -> str:
        """The workflow ``%workflow try`` plans: ``--workflow``, else the one cell holding the node."""
        if args.workflow is not None:
            return str(args.workflow)
        names = self.session.workflow_names()
        holding = [
            name
            for name in names
            if name in self.session.validated
            and any(node.name == args.node for node in self.session.validated[name].graph.nodes)
        ]
        if len(holding) == 1:
            return holding[0]
        if len(names) == 1:
            return names[0]
        known = ", ".join(names) or "none yet"
        raise UsageError(
            f"%workflow try {args.node}: say which workflow holds the node with --workflow NAME (this notebook's: {known})"
        )

    def _verb_try(self, args: Any) -> Any:
        name = self._try_workflow(args)
        scripts, workflows = self.session.cells.scripts, self.session.cells.workflows
        if name in scripts:  # its plan has no nodes: a script's steps are known once it runs
            kind = _kind(scripts[name])
            raise UsageError(
                f"%workflow try {args.node}: {name} is a %%{kind} cell, whose steps are known only once it runs; "
                f"run one step again from a run of it with %workflow fork RUN --at {args.node}"
            )
        # try takes no --input: a required input comes from the cell's magic line
        retry = f"%%workflow {name}" if name in workflows else None
        plan, _ = self._target(name, [], store=True, retry=retry)
        from_run = self._expand_id(args.from_run) if args.from_run else None
        tried = api.call(api.service().try_node(plan.plan_id, args.node, from_run=from_run))
        derived = tried.plan
        upstream = ", ".join(tried.seed_nodes) or "(none)"
        print(f"try node {tried.node} of workflow {name}: plan {derived.plan_id}  digest {derived.graph_digest}")
        print(f"upstream values from run {tried.source_run}: {upstream}")
        if not args.yes:

            def on_run() -> RunHandle:
                return api.run_try(
                    tried, confirm_digest=derived.graph_digest, mode=args.mode, approval_timeout=_approval_timeout(args)
                )

            again = f"%workflow try {tried.node} --workflow {name} --from {tried.source_run[:13]} --yes"
            show_plan_card(derived, on_run=on_run, confirm=again)
            return None
        handle = api.run_try(tried, yes=True, mode=args.mode, approval_timeout=_approval_timeout(args))
        return self._started(handle, args)

    def _verb_fork(self, args: Any) -> Any:
        """``%workflow fork RUN --at NODE [--value JSON] [--from-plan PLAN] [--max-tokens N]``
        (docs/fork.md): the derived plan is stored and shown, then run on a plan card (or at once
        with ``--yes``), its budget journaled as ``%workflow run``'s."""
        edited = args.value is not None
        try:
            value = json_value(args.value, where="--value") if edited else None
        except ArgumentError as err:
            raise UsageError(f"%workflow fork: {err}") from None
        run = self._expand_id(args.run)
        from_plan = self._expand_id(args.from_plan) if args.from_plan else None
        inputs = self._inputs(args.input) or None
        fork = api.service().fork(
            run, at=args.at, value=value, edited=edited, inputs=inputs, from_plan=from_plan, via="notebook"
        )
        forked = api.call(fork)
        for line in forked.lines():
            print(line)
        derived, timeout, budget = forked.plan, _approval_timeout(args), _budget_args(args)
        if not args.yes:

            def on_run() -> RunHandle:
                digest = derived.graph_digest
                return api.run(derived, confirm_digest=digest, mode=args.mode, approval_timeout=timeout, **budget)

            value_flag = ["--value", shlex.quote(args.value)] if edited else []
            plan_flag = ["--from-plan", from_plan] if from_plan else []
            again = [f"%workflow fork {forked.source_run[:13]} --at {forked.node}", *value_flag, *plan_flag]
            again += [*input_flags(args.input), *_budget_flags(budget), "--yes"]
            show_plan_card(derived, on_run=on_run, confirm=" ".join(again))
            return None
        return self._started(api.run(derived, yes=True, mode=args.mode, approval_timeout=timeout, **budget), args)

    def _verb_resume(self, args: Any) -> Any:
        handle = api.resume(
            args.run,
            recover_uncertain=args.recover_uncertain,
            yes=args.yes,
            approval_timeout=_approval_timeout(args),
            decisions=parse_decisions(args.decide),
            executor=args.executor,
            raise_budget=_raises(args),
        )
        return self._started(handle, args)

    def _started(self, handle: RunHandle, args: Any) -> Any:
        if not args.wait:
            show_run(handle)
            return handle
        self._follow(handle, output=args.output)
        error = handle.exception()
        if isinstance(error, RhoError):
            raise usage_error(error)
        if error is not None:
            raise error
        return status_report(handle.state(), handle.layout)

    def _follow(self, handle: RunHandle, *, output: str) -> None:
        """Print the run's events on this (the kernel's) thread until it stops."""
        events: queue.Queue[dict[str, Any]] = queue.Queue()
        remove = handle.add_listener(events.put)
        printer = Progress(sys.stdout, output=output)
        printed = 0
        try:
            earlier = api.call(Service(layout=handle.layout).journal(handle.run_id)).events
            for record in earlier:
                printer(record)
                printed = max(printed, int(record.get("seq", 0)))
            while True:
                try:
                    record = events.get(timeout=0.1)
                except queue.Empty:
                    if handle.done() and events.empty():
                        return
                    continue
                seq = int(record.get("seq", 0))
                if seq and seq <= printed:
                    continue
                printed = max(printed, seq)
                printer(record)
        finally:
            remove()

    def _verb_status(self, args: Any) -> Report | None:
        state = api.status(args.run)
        if args.output == "json":
            print(json.dumps(status_json(state, layout=api.service().layout), indent=2))
            return None
        return status_report(state, api.service().layout)

    def _verb_cancel(self, args: Any) -> None:
        result = api.cancel(args.run, wait_seconds=args.wait)
        if args.output == "json":
            print(json.dumps(result.to_json()))
            return
        print(cancel_text(result.run_id, result.cancellation_state, result.lifecycle, waited=args.wait))

    def _verb_runs(self, args: Any) -> Report | None:
        if args.output == "json":
            query = RunsQuery(state=Lifecycle(args.state) if args.state else None, limit=max(args.limit, 0))
            print(json.dumps(api.call(api.service().run_rows(query)), indent=2))
            return None
        return runs_report(api.runs(state=args.state, limit=args.limit if args.limit > 0 else None))

    def _verb_plans(self, args: Any) -> Report | None:
        manifests = api.plans()
        if args.output == "json":
            print(json.dumps([plan_json(m) for m in manifests], indent=2))
            return None
        return plans_report(manifests)

    def _verb_result(self, args: Any) -> Report | None:
        result = api.result(args.run)
        if args.output == "json":
            print(json.dumps(result.to_json(), indent=2))
            return None
        return Report(str(result), data=result)

    def _verb_logs(self, args: Any) -> None:
        streams = ("stdout", "stderr") if args.stream == "both" else (args.stream,)
        shown = {name: 0 for name in streams}
        while True:
            found = api.logs(args.run, args.node, stream=args.stream)
            for name in streams:
                text = found.get(name, "")
                target = sys.stdout if name == "stdout" else sys.stderr
                target.write(text[shown[name] :])
                target.flush()
                shown[name] = len(text)
            state = api.status(args.run) if args.follow or not any(shown.values()) else None
            going = state is not None and state.nodes[args.node].state.value in ("pending", "ready", "running")
            if not (args.follow and going):
                break
            time.sleep(0.2)
        if state is not None and not any(shown.values()):  # say why there is nothing, as the CLI does
            print(silent_node_line(args.node, state.nodes[args.node], stream=args.stream), file=sys.stderr)

    def _verb_approve(self, args: Any) -> None:
        if args.request is None:
            pending = api.approve(args.run)
            if not pending:
                print("no pending approval requests")
            for request in pending:
                print(f"request {request.request_id}  node {request.node}  attempt {request.attempt}  ({request.kind})")
                print(json.dumps(request.facts, indent=2, sort_keys=True))
            return
        decision = api.approve(args.run, args.request, deny=args.deny, comment=args.comment)
        print(f"{decision.decision} by {decision.by} at {decision.at} via {decision.via}")

    def _verb_answer(self, args: Any) -> None:
        """Answer a human step's form: ``%workflow answer RUN STEP FIELD=JSON...`` (as the CLI's
        ``rho-notebook answer``; ``%workflow approve RUN REQUEST --deny`` declines it)."""
        for item in args.fields:
            if "=" not in item:
                msg = f"%workflow answer: {item!r} is not FIELD=JSON (one per form field, e.g. note='\"call Bob\"')"
                raise UsageError(msg)
        what = f"the answer to step {args.step}"  # a refused value is the answer's problem, not a workflow's
        try:
            values = self._inputs(args.fields)
            svc = api.service()
            request = api.call(svc.form_request(args.run, args.step))
            print(describe_request(request, answer_with="%workflow answer RUN STEP FIELD=JSON..."))
            decision = api.call(svc.answer(request, values, comment=args.comment, via="notebook"))
        except InvalidWorkflow as err:
            raise UsageError(diagnostics_text(err, what=what)) from None
        step = request.facts.get("step", request.node)
        print(f"answered step {step} by {decision.by} at {decision.at}: {json.dumps(decision.answer)}")

    def _verb_export(self, args: Any) -> Report:
        paths = args.paths
        if len(paths) == 2:
            result = api.export(paths[0], paths[1], workflow=args.workflow)
        elif len(paths) == 1:
            result = export_cells(self.session.cells, Path(paths[0]), workflow=args.workflow)
        else:
            raise UsageError(
                "%workflow export [NOTEBOOK.ipynb] DIR [--workflow NAME]: give a notebook and a folder, or only a folder for this session's cells"
            )
        text = str(result)
        if result.modules_outside_root() is not None:
            text += f"\nits modules resolve from the folder only as a workspace of its own; plan with: {result.plan_command()}"
        elif result.inputs or result.flow:
            what = "inputs are" if result.inputs else "flow name is"
            text += f"\nthe cell's {what} not part of the folder; plan with: {result.plan_command()}"
        return Report(text, data=result)

    def _verb_show(self, args: Any) -> None:
        """An earlier run's DAG and outputs from the store (nothing re-executed), with a picker of
        the runs of its workflow; without RUN the newest run of this notebook's workflow."""
        from IPython.display import display

        workflow = args.workflow
        if args.run is None and workflow is None:
            workflow = self._shown_workflow()
        picker = api.show(args.run, workflow=workflow, node=args.node)
        display(picker)  # type: ignore[no-untyped-call]

    def _shown_workflow(self) -> str | None:
        """The workflow ``%workflow show`` shows without RUN: this notebook's only ``%%workflow``
        cell, or the one planned last in this session; None when no cell ran in this kernel (a
        reopened notebook: then the newest run in this workspace)."""
        names = self.session.workflow_names()
        if len(names) == 1:
            return names[0]
        planned = [name for name in self.session.planned if name in names]
        if planned:
            return planned[-1]
        if names:
            raise UsageError(
                f"this notebook has several workflows ({', '.join(names)}): name one with %workflow show --workflow NAME"
            )
        return None

    def _verb_hub(self, args: Any) -> None:
        overview = self.session.describe()
        lines = [f"workspace  {overview['workspace']}"]
        for name, info in overview["workflows"].items():
            lines.append(
                f"{info['kind']:<10} {name:<20} {'valid' if info['valid'] else 'not validated':<14} {info['cell']}"
            )
        for label, display in overview["modules"].items():
            lines.append(f"module     {label}  {display}")
        for agent_id, display in overview["agents"].items():
            lines.append(f"agent      {agent_id}  {display}")
        for run in overview["runs"]:
            lines.append(
                f"run        {run['run_id']}  {run['workflow']:<20} {run['lifecycle']:<15} {run['outcome'] or ''}".rstrip()
            )
        if len(lines) == 1:
            lines.append("no workflow cells yet: write a %%workflow NAME cell")
        show_hub(self.session, "\n".join(lines))
