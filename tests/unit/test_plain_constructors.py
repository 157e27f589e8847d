"""The fast mode's plain path (rho_notebook/source/_starlark/plain.py: node constructors and
``workflow`` that build their value in Starlark, without a call into Python) answers exactly what
the exact mode answers: the same graph, key order and call sites included, or the same error.

A property test over the constructors' argument space: every argument a kind takes and some it
does not, with values around each rule's edges (names, empty strings, integers at the int64 edges,
lists, tags, tuples, floats, strings at the string budget) and calls written in the shapes that
decide the call site (a loop, several lines, an alias, a longer name, a loaded module, another
module's constructor, a ``*`` on the line, a line separator only Python splits at), under the
planning limits and under small ones that put the value budgets within reach.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rho_notebook.source._starlark import serve, session
from rho_notebook.source._starlark.literals import INT64_MAX, INT64_MIN
from rho_notebook.source._starlark.nodes import ALLOWED
from rho_notebook.source._starlark.plain import PLAIN
from rho_notebook.source.limits import load_limits

KINDS = [*PLAIN, "python"]
DEFAULT = load_limits().worker_limits()
SMALL = {**DEFAULT, "string_bytes": 4 * 70, "list_items": 4, "dict_items": 10, "value_depth": 2}
"""Limits under which 71 characters of four bytes, a list of 5 items or a node's 11th argument is
over a budget the plain path must not take for granted."""
LIMITS = [DEFAULT, SMALL, {**SMALL, "value_depth": 1}, {**SMALL, "dict_items": 5}]


class _Parent:
    """The parent's side of the worker's channel, in process: modules from ``files``; inputs accepted."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.frames: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> None:
        self.frames.append(message)

    def send_text(self, text: str) -> None:
        self.frames.append(json.loads(text))

    def receive(self) -> dict[str, Any]:
        last = self.frames[-1]
        if last["op"] == "declared":
            return {"op": "inputs", "values": {}}
        if last["op"] == "load" and last["label"] in self.files:
            return {"op": "source", "label": last["label"], "text": self.files[last["label"]]}
        return {"op": "source_error", "rule": "load.missing", "message": f"no module {last['label']}"}


def _answer(files: dict[str, str], limits: dict[str, int], *, fast: bool) -> str:
    """The worker's terminal frame (without its statistics) for the entry ``//wf.star``."""
    made = session.Session.__init__

    def only_exact(self: session.Session, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **{**kwargs, "fast": False})

    with pytest.MonkeyPatch.context() as patch:
        if not fast:
            patch.setattr(session.Session, "__init__", only_exact)
        parent = _Parent(files)
        request = {"op": "evaluate", "entry": "//wf.star", "text": files["//wf.star"], "limits": limits}
        serve.serve(parent, request)  # type: ignore[arg-type]
    answer = parent.frames[-1]
    answer.pop("stats", None)
    return json.dumps(answer)


def literal(text: str) -> str:
    """``text`` as a Starlark string literal (controls escaped, other characters as they are)."""
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


_EDGE_INTS = [0, 1, -1, 60, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**70]


def integer(value: int) -> str:
    """``value`` as Starlark source: computed when outside int64 (such a literal is refused early)."""
    if value > INT64_MAX:
        return f"({INT64_MAX} + {value - INT64_MAX})"
    return f"({INT64_MIN} - {INT64_MIN - value})" if value < INT64_MIN else str(value)


_OTHER = [
    'output("a")',
    'template(["x", output("a")])',
    'status("a")',
    'condition.equals(status("a"), "success")',
    "schema.stdout_json(schema.string())",
    "schema.string()",
    '("a", "b")',
    '{"GPU": 1}',
    '{"b": 1, "a": 2}',
    "{1: 2}",
    '{"a": [1]}',
    '[["x"]]',
    '[{"a": 1}]',
    '["x", 1]',
    '["", "x"]',
    "1 / 2",
    "input",
    '"local"',
    '"any"',
    '"read_only"',
    '"mutating"',
    '"exclusive"',
    '"shared"',
    '"//m.py"',
    '"f"',
]
names = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_-]{0,64}", fullmatch=True),
    st.text(alphabet="az09_-A. \n", max_size=66),
    st.sampled_from(["", "a" * 63, "a" * 64, "a\n", "aA", "a.b", "é", "a b", "0a", "_a"]),
)
strings = st.text(max_size=80) | st.sampled_from(["", "x", "true", "a" * 70, "a" * 71, "é" * 70, "😀" * 71])
scalars = st.one_of(
    names.map(literal),
    strings.map(literal),
    (st.sampled_from(_EDGE_INTS) | st.integers(-(2**65), 2**65)).map(integer),
    st.sampled_from(["True", "False", "None"]),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=6).map(lambda items: "[" + ", ".join(items) + "]"),
    st.sampled_from(_OTHER),
)
_GOOD = {
    "name": '"a"',
    "argv": '["true"]',
    "executable": '"sh"',
    "command": '"echo hi"',
    "prompt": '"go"',
    "agent": '"helper"',
    "module": '"//m.py"',
    "function": '"f"',
    "timeout_seconds": "5",
    "max_output_bytes": "10",
}


@st.composite
def arguments(draw: st.DrawFn, kind: str) -> str:
    """A constructor's keyword arguments as source: mostly valid ones, some changed or dropped,
    some added (an argument of the kind or another)."""
    chosen = {key: value for key, value in _GOOD.items() if key in ALLOWED[kind]}
    pool = sorted(ALLOWED[kind] | {"bogus", "kind", "at", "__rho__", "when", "output", "resources"})
    for key in draw(st.lists(st.sampled_from(pool), max_size=4, unique=True)):
        chosen[key] = draw(values)
    for key in draw(st.lists(st.sampled_from(sorted(chosen)), max_size=2, unique=True)):
        if draw(st.booleans()):
            del chosen[key]
    order = draw(st.permutations(sorted(chosen)))
    return ", ".join(f"{key} = {chosen[key]}" for key in order)


SHAPES = {
    "loop": "    nodes = []\n    for i in range(3):\n        nodes.append({kind}({args}))\n    n = nodes[0]",
    "lines": "    n = {kind}(\n        {args},\n    )",
    "alias": "    make = {kind}\n    n = make({args})",
    "longer name": "    my{kind} = {kind}\n    n = my{kind}({args})",
    "twice on a line": "    n = [{kind}({args}), {kind}({args})][1]",
    "star on the line": "    n = 2 * 1 and {kind}({args})",
    "frame text in a string": '    n = "* //wf.star:1, in x" and {kind}({args})',
    "name before the call": '    n = "{kind}" and {kind}({args})',
    "wide characters": '    n = "é😀" and {kind}({args})',
    "line separator": '    s = "a\u2028b"\n    n = {kind}({args})',
    "arguments kept": '    kw = dict({args})\n    n = {kind}(**kw)\n    for v in kw.values():\n        if type(v) == "list":\n            v.append("late")',
    "helper": "    n = helper()",
    "top level": "    n = TOP",
    "loaded": "    n = lib_node()",
    "other module's constructor": "    n = lib_{kind}({args})",
}
"""How build makes its node ``n``; ``helper`` and ``TOP`` are defined in the entry module."""
WORKFLOWS = [
    'workflow(name = "w", nodes = [n])',
    'workflow(nodes = [n], name = "w", concurrency = {"total": 2, "command": 1}, checkout = "shared")',
    'workflow(name = "w", nodes = [n, n], concurrency = None)',
    'workflow(name = "w", nodes = [n], concurrency = {"total": 0})',
    'workflow(name = "w", nodes = [n], concurrency = {"bogus": 1})',
    'workflow(name = "w", nodes = [n], concurrency = {"total": True})',
    'workflow(name = "w", nodes = [n], checkout = "none")',
    'workflow(name = "W", nodes = [n])',
    'workflow(name = "w", nodes = (n,))',
    'workflow(name = "w", nodes = [n, 1])',
    'workflow(name = "w", nodes = [n], bogus = 1)',
    'workflow(name = "w", nodes = [n]) if 2 * 1 else None',
]
CHANGES = [
    "",
    '    n[1] = "x"\n',
    '    n["argv"] = n.get("argv", []) + ["x"]\n',
    '    n["extra"] = {"b": 1, "a": [2]}\n',
    '    n["extra"] = ("a",)\n',
    '    n.pop("name", None)\n',
    '    n["__rho__"] = "nope"\n',
]
"""Changes build makes to the node before ``workflow`` (aliasing and the copy it must make)."""


def sources(kind: str, args: str, shape: str, workflow: str, change: str) -> dict[str, str]:
    call = f"{kind}({args})"
    entry = (
        f'load("//lib.star", "lib_node", lib_{kind} = "{kind}")\n'
        f"TOP = {call}\n"
        f"def helper():\n    return {call}\n"
        "def build(inputs):\n"
        + SHAPES[shape].format(kind=kind, args=args)
        + "\n"
        + change
        + f"    w = {workflow}\n"
        + '    n["late"] = [1]\n'
        + "    for v in n.values():\n"
        + '        if type(v) == "list":\n'
        + '            v.append("late")\n'
        + "    return w\n"
        + "WORKFLOW = define(inputs = {}, build = build)\n"
    )
    return {"//wf.star": entry, "//lib.star": f"def lib_node():\n    return {call}\n"}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_plain_path_answers_what_the_exact_mode_answers(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(KINDS))
    files = sources(
        kind,
        data.draw(arguments(kind)),
        data.draw(st.sampled_from(sorted(SHAPES))),
        data.draw(st.sampled_from(WORKFLOWS)),
        data.draw(st.sampled_from(CHANGES)),
    )
    limits = data.draw(st.sampled_from(LIMITS))
    fast = _answer(files, limits, fast=True)
    assert fast == _answer(files, limits, fast=False), files


EDGES = [
    *map(literal, ["", "a", "aA", "a" * 63, "a" * 64, "a\n", "0a", "_a", "a-b_9", "é", "a" * 70, "a" * 71]),
    *map(literal, ["😀" * 70, "😀" * 71, "local", "any", "read_only", "mutating", "exclusive", "//m.py", "f"]),
    *[
        "0",
        "1",
        "-1",
        f"({INT64_MAX} + 1)",
        str(INT64_MAX),
        str(INT64_MIN),
        f"({INT64_MIN} - 1)",
        "True",
        "False",
        "None",
    ],
    *["[]", '[""]', '["", "x"]', '["x"]', '["x", ""]', '["x"] * 4', '["x"] * 5', '["😀" * 71]', '["a" * 71]', "[1]"],
    *["[None]", '[["x"]]', "[{}]", "{}", '{"GPU": 1}', '("x",)', "1 / 2", *_OTHER[:6]],
]
"""Values at the edges of the plain path's rules (rho_notebook/source/_starlark/plain.py): names,
strings at the string budget (71 characters of four bytes are over it under SMALL), integers at
the int64 edges (computed: a literal outside int64 is refused before evaluation), lists at the
list budget, and values no plain rule takes."""


def test_every_argument_at_the_edges_of_every_rule() -> None:
    """Each kind's valid arguments with one of them (any argument a kind takes, and one it does not)
    set to each edge value, under each set of limits: the answers of both modes are the same."""
    differ = []
    for kind in KINDS:
        good = {key: value for key, value in _GOOD.items() if key in ALLOWED[kind]}
        for key in sorted(ALLOWED[kind] | {"bogus"}):
            for value in EDGES:
                args = ", ".join(f"{k} = {v}" for k, v in {**good, key: value}.items())
                files = {"//wf.star": _MINIMAL.format(call=f"{kind}({args})")}
                for limits in LIMITS if value.startswith(("[", '"a" *', '"😀')) else LIMITS[:2]:
                    if _answer(files, limits, fast=True) != _answer(files, limits, fast=False):
                        differ.append((kind, key, value, limits["string_bytes"], limits["value_depth"]))
    assert differ == []


_MINIMAL = """
def build(inputs):
    nodes = []
    for i in range(2):
        nodes.append({call})
    return workflow(name = "w", nodes = nodes, concurrency = {{"total": 2}})

WORKFLOW = define(inputs = {{}}, build = build)
"""


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_plain_nodes_in_every_shape_are_answered_alike(shape: str) -> None:
    """Each call shape with valid arguments, so that the plain path is taken wherever it may be."""
    for kind in KINDS:
        args = ", ".join(f"{key} = {value}" for key, value in _GOOD.items() if key in ALLOWED[kind])
        files = sources(kind, args, shape, WORKFLOWS[1], "")
        limits = load_limits().worker_limits()
        fast = _answer(files, limits, fast=True)
        assert '"op": "result"' in fast, fast
        assert fast == _answer(files, limits, fast=False)


@pytest.mark.parametrize("kind", KINDS)
def test_a_call_chain_at_the_call_depth_budget_is_answered_alike(kind: str) -> None:
    """The plain path is called where the exact mode calls Python, one frame deep as that call is:
    a chain of calls that reaches ``evaluator_call_depth`` at the constructor overflows (or not)
    alike in both modes."""
    args = ", ".join(f"{key} = {value}" for key, value in _GOOD.items() if key in ALLOWED[kind])
    limits = {**DEFAULT, "evaluator_call_depth": 12}
    answers = set()
    for depth in range(6, 13):
        chain = "".join(f"def f{i}():\n    return f{i + 1}()\n" for i in range(depth))
        chain += f"def f{depth}():\n    return {kind}({args})\n"
        body = "def build(inputs):\n    return workflow(name = 'w', nodes = [f0()])\n"
        files = {"//wf.star": chain + body + "WORKFLOW = define(inputs = {}, build = build)\n"}
        fast = _answer(files, limits, fast=True)
        assert fast == _answer(files, limits, fast=False), depth
        answers.add(json.loads(fast)["op"])
    assert answers == {"result", "error"}
