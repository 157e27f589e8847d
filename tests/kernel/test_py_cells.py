"""``%%py LABEL`` cells: a Python module held at a label and run in the kernel, the same function
run as a ``python(...)`` node, errors shown as the cell's, and the module in plans and exports.

The first tests use real Jupyter kernels (nbclient); the rest the in-process IPython shell."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

from rho_notebook.service.cells import PythonCell
from tests.conftest import Project
from tests.kernel.helpers import C, ok, usage_error, workflow_cell
from tests.kernel.test_kernel import kernel

STATS_BODY = '''"""Statistics of numbers written as words."""


def stats(numbers):
    values = [int(word) for word in numbers.split()]
    total = sum(values)
    return {
        "count": len(values),
        "total": total,
        "largest": max(values),
        "verdict": "big" if total >= 20 else "small",
    }
'''
STATS = "%%py //nodes/stats.py\n" + STATS_BODY

SCHEMA = (
    'schema.record({"count": schema.integer(), "total": schema.integer(), "largest": schema.integer(), '
    '"verdict": schema.enum_(["big", "small"])})'
)
FLOW = workflow_cell(
    "pyflow",
    f"""        python(name = "stats", module = "//nodes/stats.py", function = "stats",
               args = {{"numbers": inputs["numbers"]}}, output = {SCHEMA}, {C}),
        python(name = "fixed", module = "//nodes/stats.py", function = "stats",
               args = {{"numbers": "2 7 1 8"}}, output = {SCHEMA}, {C}),
""",
    inputs='{"numbers": input.string(default = "3 1 4 1 5 9 2 6")}',
)


def test_a_py_function_gives_the_same_value_in_the_kernel_and_as_a_node(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            shown = await k.ok(STATS)
            assert "module //nodes/stats.py (imports as nodes.stats): functions stats" in shown["text"]
            here = await k.json('import json\nprint(json.dumps([stats("3 1 4 1 5 9 2 6"), stats("2 7 1 8")]))')
            assert here == [
                {"count": 8, "total": 31, "largest": 9, "verdict": "big"},
                {"count": 4, "total": 18, "largest": 8, "verdict": "small"},
            ]
            await k.ok(FLOW)
            await k.ok("run = %workflow run pyflow --yes")
            done = await k.json(
                "import sys\nfinal = await run\n"
                "print(json.dumps({'outcome': final.outcome, 'stats': run.outputs['stats'], "
                "'fixed': run.outputs['fixed'], 'run': run.run_id, 'plan': final.plan_id, 'executable': sys.executable}))"
            )
            assert done["outcome"] == "success", done
            assert [done["stats"], done["fixed"]] == here
            # the store's result (what `rho-notebook result` prints) holds the same values
            result = ws.cli("result", done["run"], "--output", "json")
            assert result.returncode == 0, result.stderr
            nodes = json.loads(result.stdout)["nodes"]
            assert [nodes["stats"]["output"], nodes["fixed"]["output"]] == here
            # the plan froze the cell body as the module, and the kernel's interpreter
            plan = await k.json(
                "from rho_notebook.notebook import api\n"
                f"p = api.call(api.service().load_plan({done['plan']!r}))\n"
                "print(json.dumps({'modules': [[m.label, m.name, m.text] for m in p.graph.python_modules], "
                "'interpreter': p.graph.python.interpreter.file.path}))"
            )
            assert plan["modules"] == [["//nodes/stats.py", "nodes.stats", STATS_BODY]]
            assert Path(plan["interpreter"]).resolve() == Path(done["executable"]).resolve()

    asyncio.run(scenario())


def test_errors_in_a_py_cell_are_the_cells_errors(ws: Project) -> None:
    async def scenario() -> None:
        async with kernel(ws) as k:
            broken = await k.cell("%%py //nodes/bad.py\nx = 1\n\ndef f(:\n    return x\n")
            names = [name for name, _ in broken["errors"]]
            assert names[0] == "SyntaxError", broken
            assert "//nodes/bad.py: the module does not compile (line 4)" in broken["errors"][-1][1]
            raising = await k.cell("%%py //nodes/boom.py\ndef f(x):\n    return 1 / x\n\nf(0)\n")
            assert [name for name, _ in raising["errors"]] == ["ZeroDivisionError"], raising
            # the traceback shows the module's own lines (cell line numbers), not the magic's frames
            node = k.client.nb.cells[-1]
            colored = "\n".join(line for o in node.outputs if o.output_type == "error" for line in o["traceback"])
            traceback = re.sub(r"\x1b\[[0-9;]*m", "", colored)
            assert "return 1 / x" in traceback and "f(0)" in traceback
            assert "magics.py" not in traceback and "run_cell_magic" not in traceback
            # the module that raised is still held: a later cell can use what it defined before the error
            assert (await k.json("import json\nprint(json.dumps(f(4)))")) == 0.25

    asyncio.run(scenario())


# -- the in-process shell ----------------------------------------------------------------------------


def test_an_interrupt_while_a_py_module_runs_shows_the_modules_lines(ip: Any) -> None:
    """Ctrl-C during a long top-level computation: the traceback is the module's, as for an error."""
    from tests.kernel.helpers import cell

    result, captured = cell(ip, "%%py //nodes/slow.py\nx = 1\nraise KeyboardInterrupt\n")
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    traceback = re.sub(r"\x1b\[[0-9;]*m", "", captured.stdout)
    assert "----> 3 raise KeyboardInterrupt" in traceback, traceback
    assert "magics.py" not in traceback and "run_cell_magic" not in traceback and "_pycell.py" not in traceback


def test_a_py_label_must_be_a_module_label(ip: Any) -> None:
    assert "must start with //" in usage_error(ip, "%%py nodes/x.py\nx = 1\n")
    assert "must name a .py file" in usage_error(ip, "%%py //nodes/x.star\nx = 1\n")
    assert "'my-mod' is not a Python identifier" in usage_error(ip, "%%py //nodes/my-mod.py\nx = 1\n")
    assert "required: label" in usage_error(ip, "%%py\nx = 1\n")


def test_a_py_cell_is_held_as_written_and_overlays_the_file(ip: Any, ws: Project) -> None:
    from rho_notebook.notebook.extension import current_session

    ws.write("nodes/stats.py", "def stats(numbers):\n    return {'from': 'file'}\n")
    ok(ip, STATS)
    session = current_session()
    module = session.cells.python["//nodes/stats.py"]
    assert isinstance(module, PythonCell) and module.text == STATS_BODY
    ok(ip, FLOW)
    source = session.source("pyflow")
    assert source.modules["//nodes/stats.py"].text == STATS_BODY
    assert source.python_interpreter == Path(sys.executable)
    plan = session.validated["pyflow"]
    assert [(m.label, m.text) for m in plan.graph.python_modules] == [("//nodes/stats.py", STATS_BODY)]
    # editing the cell changes the frozen module and the graph digest
    ok(ip, STATS.replace("total >= 20", "total >= 40"))
    edited = ok(ip, FLOW)[0].data
    assert edited.graph_digest != plan.graph_digest
    assert edited.graph.python_modules[0].text == STATS_BODY.replace("total >= 20", "total >= 40")


def test_a_broken_py_module_is_named_at_its_cell_line_when_planning(ip: Any) -> None:
    from rho_notebook.notebook.extension import current_session

    bad = "%%py //nodes/stats.py\ndef stats(numbers):\n    return {\n"
    assert "the module does not compile (line 3)" in usage_error(ip, bad)
    message = usage_error(ip, FLOW)
    # the module is held as written; planning names its cell and the cell's line (the magic is line 1)
    display = current_session().cells.python["//nodes/stats.py"].display
    assert f"{display}:3:" in message, message


def test_export_writes_each_py_cell_at_its_label(ip: Any, ws: Project) -> None:
    ok(ip, STATS)
    ok(ip, "%%py //nodes/__init__.py\n# the nodes package\n")
    ok(ip, FLOW)
    result = ok(ip, "%workflow export out")[0].data
    assert (ws.root / "out" / "nodes" / "stats.py").read_text() == STATS_BODY
    assert (ws.root / "out" / "nodes" / "__init__.py").read_text() == "# the nodes package\n"
    assert "//nodes/stats.py" in result.modules


CALC = "%%py //nodes/calc.py\ndef double(x):\n    return 2 * x\n"
REPORT = (
    "%%py //nodes/report.py\nfrom nodes.calc import double\n\n\ndef report(values):\n"
    '    return {"doubled": [double(v) for v in values]}\n'
)
REPORT_FLOW = workflow_cell(
    "reports",
    f"""        python(name = "report", module = "//nodes/report.py", function = "report", args = {{"values": [1, 2, 5]}},
               output = schema.record({{"doubled": schema.list(schema.integer())}}), {C}),
""",
)


def test_py_modules_import_each_other_by_dotted_name_in_the_kernel_and_in_a_node(ip: Any, ws: Project) -> None:
    import rho_notebook as rho

    ok(ip, CALC)
    ok(ip, REPORT)
    here = ok(ip, "report([1, 2, 5])")[0]
    assert here == {"doubled": [2, 4, 10]}
    plan = ok(ip, REPORT_FLOW)[0].data
    assert [m.label for m in plan.graph.python_modules] == ["//nodes/calc.py", "//nodes/report.py"]
    ok(ip, "run = %workflow run reports --yes")
    handle = ip.user_ns["run"]
    final = handle.wait(60)
    assert final.outcome == "success", rho.result(handle.run_id)
    assert handle.outputs["report"] == here
    # an edited module is read again by the next import, in the kernel as in the next plan
    ok(ip, CALC.replace("2 * x", "3 * x"))
    ok(ip, REPORT)
    assert ok(ip, "report([1])")[0] == {"doubled": [3]}
    assert "nodes.calc" in sys.modules and sys.modules["nodes.calc"].__file__ == "<%%py //nodes/calc.py>"
    ip.run_line_magic("unload_ext", "rho_notebook")
    assert "nodes.calc" not in sys.modules
    ip.run_line_magic("load_ext", "rho_notebook")
