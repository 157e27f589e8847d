"""The IPython magics: ``%%workflow``, ``%%star``, ``%%py``, ``%%script``, ``%%flow``, ``%%graph``, ``%%agent`` and ``%workflow VERB``.

Thin wrappers of :mod:`rho_notebook.notebook.api` over one :class:`NotebookSession`. User mistakes
(invalid workflows, unknown IDs, refused runs, bad arguments) become ``UsageError`` (shown
without a traceback); anything else is a bug and keeps its traceback. Magic lines are taken
literally (no ``$var`` / ``{expr}`` expansion), because JSON inputs and cell bodies contain braces,
with one exception: where a ``%workflow`` verb takes a run, plan or request ID (``status RUN``,
``run PLAN``, ``approve RUN REQUEST``, ...), ``{expr}`` and ``$name`` are expanded by IPython's
rules in the user namespace, so ``%workflow status {run.run_id}`` works.

The ``%workflow VERB`` line magic's verbs are :class:`rho_notebook.notebook._verbs.WorkflowVerbs`.

``%%script NAME`` replaces IPython's own ``%%script PROGRAM`` magic while the extension is loaded
(unloading gives it back); IPython's ``%%bash``, ``%%sh`` and ``%%python3`` remain.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Literal

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_cell_magic, magics_class, no_var_expand

from rho_notebook.errors import ArgumentError, HelpShown, InvalidWorkflow, RhoError
from rho_notebook.model.plan import Plan
from rho_notebook.notebook import api
from rho_notebook.notebook._pycell import run_python_cell
from rho_notebook.notebook._pyimport import CellModules
from rho_notebook.notebook._render import Report, script_report, workflow_report
from rho_notebook.notebook._usage import diagnostics_text, usage_error
from rho_notebook.notebook._verbs import WorkflowVerbs, hold_graph
from rho_notebook.notebook.display import show_flow_tree, show_graph, show_run, show_script
from rho_notebook.notebook.session import NotebookSession
from rho_notebook.service.cells import (
    AgentCell,
    Cell,
    FlowCell,
    GraphCell,
    ModuleCell,
    PythonCell,
    ScriptCell,
    WorkflowCell,
    parse_cell,
)

__all__ = ["WorkflowMagics", "diagnostics_text"]


def _help_ends_the_cell(magic: Callable[[Any, str, str], Any]) -> Callable[[Any, str, str], Any]:
    """A cell magic whose magic line asked for ``--help``: the help is printed, the cell ends there
    (no traceback, nothing held)."""

    @wraps(magic)
    def run(self: Any, line: str, cell: str) -> Any:
        try:
            return magic(self, line, cell)
        except HelpShown:
            return None

    return run


@magics_class
class WorkflowMagics(Magics):
    """Registered by :func:`rho_notebook.notebook.extension.load_ipython_extension`."""

    def __init__(self, shell: Any, *, session: NotebookSession) -> None:
        super().__init__(shell)
        self.session = session
        self.verbs = WorkflowVerbs(shell, session=session)

    # -- helpers ---------------------------------------------------------------------------------------

    def _display_name(self, kind: str, line: str, body: str) -> str:
        """``cell In[N]`` for the cell being run, N as the front end shows it.

        The number is read from the input history (the current cell is stored before it runs),
        because IPython versions differ in when ``execution_count`` is incremented. A cell run
        without history (``store_history=False``, as nbval does) is named by its magic line,
        which is unique among the cells a session holds.
        """
        history = getattr(getattr(self.shell, "history_manager", None), "input_hist_raw", None)
        if (
            isinstance(history, list)
            and len(history) > 1
            and body.strip() in str(history[-1])
            and f"%%{kind}" in str(history[-1])
        ):
            return f"cell In[{len(history) - 1}]"
        head = line.split()[0] if kind != "workflow" and line.split() else line.split(" --", 1)[0].strip()
        return f"cell %%{kind} {head}".rstrip()

    def _cell(self, kind: str, line: str, cell: str) -> Cell:
        try:
            return parse_cell(kind, line, cell, display=self._display_name(kind, line, cell))  # type: ignore[arg-type]
        except ArgumentError as err:
            raise UsageError(str(err)) from None

    # -- cell magics -------------------------------------------------------------------------------------

    @no_var_expand
    @line_cell_magic
    def workflow(self, line: str, cell: str | None = None) -> Any:
        """%%workflow [NAME] [--input KEY=JSON]...  |  %workflow VERB [ARGS]  (%workflow --help)"""
        try:
            if cell is None:
                return self.verbs.dispatch(line)
            return self._workflow_cell(line, cell)
        except HelpShown:
            return None
        except ArgumentError as err:
            raise UsageError(str(err)) from None
        except RhoError as err:
            raise usage_error(err) from None

    def _workflow_cell(self, line: str, body: str) -> Report:
        parsed = self._cell("workflow", line, body)
        if not isinstance(parsed, WorkflowCell):  # pragma: no cover - parse_cell returns the kind asked for
            raise TypeError(parsed)
        result = self.session.define_workflow(parsed, validate=api.validate)
        if result.error is not None:
            what = f"%%workflow {parsed.name} ({parsed.display})" if parsed.name else f"%%workflow ({parsed.display})"
            retry = f"%%workflow {parsed.args}".rstrip()
            raise UsageError(diagnostics_text(result.error, what=what, retry=retry))
        if result.plan is None:  # pragma: no cover - define_workflow returns a plan or an error
            raise RuntimeError("validation returned neither a plan nor diagnostics")
        show_graph(result.plan)
        return workflow_report(result.plan, result.cell if isinstance(result.cell, WorkflowCell) else None)

    @no_var_expand
    @cell_magic
    @_help_ends_the_cell
    def star(self, line: str, cell: str) -> Report:
        """%%star LABEL — the cell is a Starlark module, e.g. %%star //lib/common.star"""
        module = self._cell("star", line, cell)
        if not isinstance(module, ModuleCell):  # pragma: no cover
            raise TypeError(module)
        self.session.define_module(module)
        lines = module.body.count("\n")
        return Report(
            f'module {module.label}: {lines} line{"s" if lines != 1 else ""}; load it with load("{module.label}", ...)',
            data=module,
        )

    @no_var_expand
    @cell_magic
    @_help_ends_the_cell
    def py(self, line: str, cell: str) -> Report:
        """%%py LABEL — the cell is a Python module that python() nodes run, e.g. %%py //nodes/stats.py;
        it also runs here, so its functions can be called in the next cell"""
        module = self._cell("py", line, cell)
        if not isinstance(module, PythonCell):  # pragma: no cover
            raise TypeError(module)
        self.session.define_python(module)
        imports = self._python_imports()
        imports.forget()  # imports of %%py modules read the cells as they are now
        functions = run_python_cell(self.shell, module)
        example = functions[0] if functions else "FUNCTION"
        defined = f"functions {', '.join(functions)}" if functions else "no functions"
        return Report(
            f"module {module.label} (imports as {module.module_name}): {defined}; "
            f'a node runs one with python(module = "{module.label}", function = "{example}", ...)',
            data=module,
        )

    def _python_imports(self) -> CellModules:
        """The session's ``%%py`` modules, importable here by dotted name (installed on first use)."""
        found: CellModules | None = getattr(self, "_py_imports", None)
        if found is None:
            found = CellModules(lambda: self.session.cells.python)
            self._py_imports = found
        found.install()
        return found

    def release(self) -> None:
        """Undo what the magics installed in the process (``%unload_ext``)."""
        found: CellModules | None = getattr(self, "_py_imports", None)
        if found is not None:
            found.uninstall()

    def _script_cell(self, kind: Literal["script", "flow"], line: str, cell: str) -> ScriptCell:
        parsed = self._cell(kind, line, cell)
        if not isinstance(parsed, ScriptCell):  # pragma: no cover - parse_cell returns the kind asked for
            raise TypeError(parsed)
        return parsed

    def _invalid(self, kind: Literal["script", "flow"], cell: ScriptCell, error: InvalidWorkflow) -> UsageError:
        """The diagnostics of an invalid ``%%script`` or ``%%flow`` cell, pointing at its lines."""
        text = diagnostics_text(
            error, what=f"%%{kind} {cell.name} ({cell.display})", retry=f"%%{kind} {cell.args}".rstrip()
        )
        if kind == "script" and any(d.rule == "python.syntax" for d in error.diagnostics()):
            text += (
                f"\n(%%script NAME holds a Python script workflow while rho_notebook is loaded; to run the cell "
                f"with a program, use {self._program_magics(cell.name)}, or %unload_ext rho_notebook)"
            )
        named = [d for d in error.diagnostics() if d.rule == "flow.name"]
        if kind == "flow" and named:
            flow = named[0].suggestion  # a misspelt name's closest flow, else the first the cell defines
            if flow is not None and flow[0].islower():  # an instance the cell makes: the magic line misspelt it
                text += f"\n(the cell defines the flow {flow}: run it as %%flow {flow})"
            else:  # a cell's name is lower case, so it cannot be the class's: an instance is what to add
                text += (
                    f"\n(%%flow {cell.name} runs the Workflow the cell defines as {cell.name}: a subclass, or an "
                    f"instance such as `{cell.name} = {flow or 'MyFlow'}()` at the end of the cell)"
                )
        return UsageError(text)

    def _program_magics(self, program: str) -> str:
        """IPython's cell magics that run a cell with ``program``: its own (``%%bash``) when IPython
        has one, and ``%%sh``."""
        found = self.shell.magics_manager.magics["cell"].get(program) if self.shell is not None else None
        if found is None or getattr(found, "__self__", None) is self or program == "sh":
            return "IPython's %%sh"
        return f"IPython's %%{program} or %%sh"

    def _define_script(self, kind: Literal["script", "flow"], cell: ScriptCell, *, store: bool) -> Plan:
        """Hold a ``%%script`` or ``%%flow`` cell and check it: its validation, or with ``store`` its
        stored plan."""
        try:
            result = self.session.define_script(cell, validate=api.plan if store else api.validate)
        except RhoError as err:
            raise usage_error(err) from None
        if result.error is not None:
            raise self._invalid(kind, cell, result.error)
        if result.plan is None:  # pragma: no cover - define_script returns a plan or an error
            raise RuntimeError("validation returned neither a plan nor diagnostics")
        return result.plan

    @no_var_expand
    @cell_magic
    @_help_ends_the_cell
    def script(self, line: str, cell: str) -> Report:
        """%%script NAME [--input KEY=JSON]... — the cell is a Python script workflow (NAME.py);
        it is stored and checked, never run here: %workflow run NAME runs it in its own process"""
        parsed = self._script_cell("script", line, cell)
        plan = self._define_script("script", parsed, store=False)
        show_script(plan)
        return script_report(plan, parsed, label=self.session.entry_label(parsed.name, suffix=".py"))

    @no_var_expand
    @cell_magic
    @_help_ends_the_cell
    def flow(self, line: str, cell: str) -> Any:
        """%%flow NAME [--input KEY=JSON]... [--compile] — the cell is a flow module (NAME.py) defining
        the Workflow NAME; running the cell plans it and starts one flow run in the background, in its
        own process (the cell is the consent to that run), its model calls shown live as steps.
        --compile shows the module tree instead and runs nothing."""
        parsed = self._script_cell("flow", line, cell)
        if not isinstance(parsed, FlowCell):  # pragma: no cover - parse_cell returns the kind asked for
            raise TypeError(parsed)
        if parsed.compile_only:
            return self._compile_flow(parsed)
        plan = self._define_script("flow", parsed, store=True)
        self.session.planned[parsed.name] = plan
        print(f"plan {plan.plan_id}  flow {parsed.name}  digest {plan.graph_digest}")
        handle = api.run(plan, confirm_digest=plan.graph_digest)
        show_run(handle)
        return handle

    def _compile_flow(self, cell: FlowCell) -> Report:
        """``%%flow NAME --compile``: the module tree and the check's findings; nothing runs. With
        errors among the findings the cell fails after showing the tree."""
        try:
            check = self.session.check_flow(cell)
        except InvalidWorkflow as err:
            raise self._invalid("flow", cell, err) from None
        except RhoError as err:
            raise usage_error(err) from None
        show_flow_tree(check.manifest)
        errors = check.errors
        warnings = len(check.findings) - errors
        label = self.session.entry_label(cell.name, suffix=".py")
        lines = [
            f"flow {cell.name}: stored as {label}; compiled ({errors} error{'s' if errors != 1 else ''}, "
            f"{warnings} warning{'s' if warnings != 1 else ''}); not run",
            *(finding.render() for finding in check.findings),
            f"next     %%flow {cell.name} (without --compile) plans and runs it",
        ]
        if errors:  # the tree is shown; the cell fails as an invalid cell does (Run all stops here)
            raise UsageError("\n".join(lines[:-1]))
        return Report("\n".join(lines), data=check)

    @no_var_expand
    @cell_magic
    @_help_ends_the_cell
    def graph(self, line: str, cell: str) -> Report:
        """%%graph NAME — the cell is an item-graph document (NAME.graph.yaml, YAML or JSON, docs/graphs.md);
        it is stored and validated at once; ``%workflow run NAME`` runs it."""
        parsed = self._cell("graph", line, cell)
        if not isinstance(parsed, GraphCell):  # pragma: no cover - parse_cell returns the kind asked for
            raise TypeError(parsed)
        return hold_graph(self.session, parsed)

    @no_var_expand
    @cell_magic
    @_help_ends_the_cell
    def agent(self, line: str, cell: str) -> Report:
        """%%agent ID — the cell is an agent definition file (the format of agents/ID.md)"""
        parsed = self._cell("agent", line, cell)
        if not isinstance(parsed, AgentCell):  # pragma: no cover
            raise TypeError(parsed)
        try:
            definition = self.session.define_agent(parsed)
        except InvalidWorkflow as err:
            raise UsageError(diagnostics_text(err, what=f"%%agent {parsed.agent_id} ({parsed.display})")) from None
        tools = "all" if definition.tools == "all" else ", ".join(definition.tools)
        return Report(
            f"agent {definition.id}: {definition.description} (runtime {definition.runtime}; tools: {tools})",
            data=definition,
        )
