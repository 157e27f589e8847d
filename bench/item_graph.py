"""What an item-graph step costs on the runner, against a command node measured in the same run.

    PYTHONPATH=. python bench/item_graph.py [--samples 5]

Workloads (planning is done once up front and never timed; "run" = ``Service.run`` in-process,
with the durable journal in a temporary directory):

(a) a chain of 100 ``set`` steps (each sets one field by a mapping; the owner computes it, no
    process starts). Baseline: a Starlark chain of 100 ``true`` command nodes. Goal: an inline
    item step costs no more than a command node (ratio <= 1.0). Both pay the journal and the
    durable ``value.json`` an output needs (a directory and two fsyncs, most of the cost on this
    machine); an inline step skips the process and its launch fsync (``ItemNode.pure``).
(b) a chain of 100 ``code`` steps (each runs ``run(item)`` in the owner's warm supervised
    Starlark worker, :mod:`rho_notebook.exec.code`). The worker pool is emptied before every
    sample, so each run pays its worker's start (at its first code step), as a run's owner does.
    Baseline: the set steps of (a), measured in the same run. Goal (issue 31, item 4): a code step
    costs at most 3x a set step (ratio <= 3.0). Before the warm worker a code step started a fresh
    worker: ~46-50 ms, 30x a set step.

Each figure is the median of ``--samples`` runs; workloads are interleaved. Exit status 0 unless
a run does not succeed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rho_notebook.exec.code import code_workers  # noqa: E402
from rho_notebook.model.plan import Plan  # noqa: E402
from rho_notebook.service import Consent, Service, StartRun  # noqa: E402
from rho_notebook.source.workspace import Workspace  # noqa: E402
from rho_notebook.store.layout import StoreLayout  # noqa: E402

SETS = 100
CODES = 100


def set_chain(count: int) -> str:
    steps = "\n".join(
        f'  - {{id: s{i}, kind: set, params: {{fields: {{n{i}: "={{{{ $json.n }}}}"}}}}}}' for i in range(count)
    )
    edges = "\n".join(f"  - {{from: s{i}, to: s{i + 1}}}" for i in range(count - 1))
    return f"name: sets\ninputs:\n  n: {{type: integer}}\nsteps:\n{steps}\nedges:\n{edges}\n"


def code_chain(count: int) -> str:
    source = '"def run(item):\\n    return dict(item, n = item[\\"n\\"] + 1)\\n"'
    steps = "\n".join(f"  - {{id: c{i}, kind: code, params: {{source: {source}}}}}" for i in range(count))
    edges = "\n".join(f"  - {{from: c{i}, to: c{i + 1}}}" for i in range(count - 1))
    return f"name: codes\ninputs:\n  n: {{type: integer}}\nsteps:\n{steps}\nedges:\n{edges}\n"


def command_chain(count: int) -> str:
    nodes = ",\n".join(
        f'command(name = "t{i}", argv = ["true"]'
        + (f', needs = ["t{i - 1}"]' if i else "")
        + ", timeout_seconds = 30, max_output_bytes = 1000)"
        for i in range(count)
    )
    return (
        "def build(inputs):\n"
        f'    return workflow(name = "cmds", nodes = [\n{nodes}\n    ])\n'
        "WORKFLOW = define(inputs = {}, build = build)\n"
    )


async def plan(service: Service, root: Path, name: str, text: str, inputs: dict[str, int]) -> Plan:
    (root / name).write_text(text)
    request = service.request_for(root / name, inputs=inputs, workspace=Workspace(root=root))
    return await service.plan(request)


async def timed_run(service: Service, plan: Plan) -> float:
    started = time.perf_counter()
    state = await service.run(StartRun(plan=plan.plan_id, consent=Consent(yes=True)))
    elapsed = time.perf_counter() - started
    if state.outcome != "success":
        msg = f"run of {plan.graph.name} ended {state.outcome}"
        raise SystemExit(msg)
    return elapsed


async def main(samples: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "ws"
        (root / ".rho").mkdir(parents=True)
        service = Service(layout=StoreLayout(home=Path(scratch) / "home"))
        sets = await plan(service, root, "sets.graph.yaml", set_chain(SETS), {"n": 1})
        codes = await plan(service, root, "codes.graph.yaml", code_chain(CODES), {"n": 1})
        cmds = await plan(service, root, "cmds.star", command_chain(SETS), {})
        times: dict[str, list[float]] = {"set": [], "code": [], "command": []}
        for _ in range(samples):
            times["command"].append(await timed_run(service, cmds) / SETS)
            times["set"].append(await timed_run(service, sets) / SETS)
            (await code_workers()).close()  # this run starts its worker, as an owner's first code step does
            times["code"].append(await timed_run(service, codes) / CODES)
    median = {kind: statistics.median(values) * 1000 for kind, values in times.items()}
    ratio = median["set"] / median["command"]
    print(f"samples {samples}; median ms per step")
    print(f"  command node (true)   {median['command']:7.3f}  baseline")
    print(
        f"  set step (inline)     {median['set']:7.3f}  ratio {ratio:.2f}  goal <= 1.00  {'met' if ratio <= 1.0 else 'NOT met'}"
    )
    code = median["code"] / median["set"]
    print(
        f"  code step (warm)      {median['code']:7.3f}  ratio {code:.2f} of a set step  goal <= 3.00  {'met' if code <= 3.0 else 'NOT met'}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    asyncio.run(main(parser.parse_args().samples))
