"""Deterministic stress corpus for planning limits (shared by bench/ and tests/).

Each case is a small workspace: a dict of relative path -> text, an entry path and inputs. The
same call always writes the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Case", "CASES", "graph_case", "write_case"]


@dataclass(frozen=True)
class Case:
    name: str
    files: dict[str, str]
    entry: str = "wf.star"
    inputs: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, int] = field(default_factory=dict)
    """Deterministic measurements this case must produce (nodes, edges, modules, ...)."""


def graph_case(nodes: int = 750, edges: int = 7500) -> Case:
    """A layered DAG of /bin/true commands: node i needs up to 10 predecessors, then extra edges
    on the last nodes until the edge count is exact."""
    base = sum(min(i, 10) for i in range(nodes))
    extra = edges - base
    if extra < 0 or extra > nodes - 11:
        msg = f"cannot lay out {nodes} nodes with {edges} edges"
        raise ValueError(msg)
    source = f"""
def name_of(i):
    return "n" + str(10000 + i)[1:]

def needs_of(i):
    found = [name_of(i - 1 - j) for j in range(min(i, 10))]
    if i >= {nodes - extra}:
        found.append(name_of(i - 11))
    return found

def build(inputs):
    nodes = []
    for i in range(inputs["count"]):
        nodes.append(command(
            name = name_of(i),
            argv = ["true"],
            needs = needs_of(i),
            timeout_seconds = 60,
            max_output_bytes = 1024,
        ))
    return workflow(name = "stress", nodes = nodes, concurrency = {{"total": 2, "command": 2}})

WORKFLOW = define(inputs = {{"count": input.integer(default = {nodes})}}, build = build)
"""
    return Case(
        name=f"graph_{nodes}_{edges}", files={"wf.star": source}, expect={"node_count": nodes, "edge_count": edges}
    )


def modules_case(count: int = 75, depth: int = 15, target_bytes: int = 750_000) -> Case:
    """``count`` modules in chains of ``depth`` loads, padded with comments to ``target_bytes``."""
    files: dict[str, str] = {}
    per_module = target_bytes // (count + 1)
    chains = count // depth
    heads = []
    for chain in range(chains):
        for level in range(depth):
            label = f"lib/c{chain:02d}/m{level:02d}.star"
            body = ""
            if level + 1 < depth:
                body += f'load("//lib/c{chain:02d}/m{level + 1:02d}.star", v = "value")\n'
                body += "value = v + 1\n"
            else:
                body += "value = 1\n"
            if level == 0:
                heads.append(label)
            files[label] = body + _padding(per_module - len(body))
    loads = "".join(f'load("//{h}", v{i} = "value")\n' for i, h in enumerate(heads))
    total = " + ".join(f"v{i}" for i in range(len(heads)))
    entry = (
        loads
        + f"""
def build(inputs):
    return workflow(name = "modules", nodes = [command(name = "sum", argv = ["echo", str({total})], timeout_seconds = 5, max_output_bytes = 100)])

WORKFLOW = define(inputs = {{}}, build = build)
"""
    )
    files["wf.star"] = entry + _padding(per_module - len(entry))
    return Case(name="modules", files=files, expect={"module_count": count + 1, "module_depth": depth + 1})


def _padding(size: int) -> str:
    line = "# " + "x" * 76 + "\n"
    return line * max(0, size // len(line))


def evaluator_case(iterations: int = 200_000) -> Case:
    source = f"""
def work():
    total = 0
    for i in range({iterations}):
        total += i % 7
    return total

def build(inputs):
    return workflow(name = "work", nodes = [command(name = "w", argv = ["echo", str(work())], timeout_seconds = 5, max_output_bytes = 100)])

WORKFLOW = define(inputs = {{}}, build = build)
"""
    return Case(name="evaluator_work", files={"wf.star": source})


def values_case(string_bytes: int = 512_000, items: int = 50_000) -> Case:
    source = f"""
def build(inputs):
    big = "y" * {string_bytes}
    many = list(range({items}))
    return workflow(name = "values", nodes = [
        command(name = "v", argv = ["echo", str(len(big) + len(many))], timeout_seconds = 5, max_output_bytes = 100),
    ])

WORKFLOW = define(inputs = {{}}, build = build)
"""
    return Case(name="values", files={"wf.star": source})


def schema_case(depth: int = 16, fields: int = 400) -> Case:
    source = f"""
def build(inputs):
    s = schema.string()
    for _ in range({depth - 3}):
        s = schema.list(s)
    record = schema.record({{"f" + str(1000 + i): s for i in range({fields})}})
    c = condition.equals(status("a"), "success")
    for _ in range({depth - 1}):
        c = condition.not_(c)
    return workflow(name = "schemas", nodes = [
        command(name = "a", argv = ["true"], output = schema.stdout_json(record), timeout_seconds = 5, max_output_bytes = 100),
        command(name = "b", argv = ["true"], needs = ["a"], when = c, timeout_seconds = 5, max_output_bytes = 100),
    ])

WORKFLOW = define(inputs = {{}}, build = build)
"""
    return Case(name="schemas", files={"wf.star": source}, expect={"schema_depth": depth, "condition_depth": depth})


CASES = [graph_case(), modules_case(), evaluator_case(), values_case(), schema_case()]


def write_case(case: Case, root: Path) -> Path:
    (root / ".rho").mkdir(parents=True, exist_ok=True)
    for relative, text in case.files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / case.entry
