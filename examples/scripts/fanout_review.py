"""Fan-out review: list the Python files of a folder, count their lines, ask a reviewer agent about
each file concurrently, and combine the verdicts (docs/scripts.md walks through it).

    rho-notebook validate examples/scripts/fanout_review.py
    rho-notebook run fanout_review.py --input 'folder="src"' --input workers=2

Determinism, so that ``resume`` replays instead of diverging: the file list is sorted before it is
fanned out, every concurrent step has an explicit step id derived from its file, and nothing reads
the clock or a random source. A reviewer that fails does not stop the others: its handle comes back
with ``ok`` False and the file is reported as unreviewed.
"""

import os
import re
from concurrent.futures import ThreadPoolExecutor

from rho_notebook.script import emit_output, get_inputs, run_command, run_step, schema

INPUTS = {
    "folder": {"type": "path", "required": False, "default": "src"},
    "workers": {"type": "integer", "required": False, "default": 2},
}

VERDICT = schema.record({"verdict": schema.enum(["ok", "revise"]), "summary": schema.string()})
LIMITS = {"timeout_seconds": 60, "max_output_bytes": 65536}

inputs = get_inputs()
folder = inputs["folder"]  # a canonical absolute path inside the workspace

# Command steps: what to review, and how big each file is.
listing = run_command(["find", folder, "-type", "f", "-name", "*.py"], step_id="list", **LIMITS)
files = sorted(os.path.relpath(path, folder) for path in listing.output.splitlines())  # sorted: stable ids
if not files:
    emit_output({"files": {}, "revise": [], "summary": "no Python files to review"})
    raise SystemExit(0)
counted = run_command(["wc", "-l", *[os.path.join(folder, name) for name in files]], step_id="count", **LIMITS)
lines = {}
for row in counted.output.splitlines():
    number, _, path = row.strip().partition(" ")
    if path and path != "total":
        lines[os.path.relpath(path, folder)] = int(number)


def step_id(index, name):
    """``review-<n>-<slug>``: the node-name grammar, unique and stable for a sorted list."""
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-")
    return f"review-{index}-{slug}"[:63]


def review(item):
    index, name = item
    with open(os.path.join(folder, name), encoding="utf-8") as handle:
        text = handle.read()
    prompt = (
        f"Review the file {name} ({lines.get(name, 0)} lines). Answer with JSON: "
        '{"verdict": "ok" or "revise", "summary": one sentence}.\n\n' + text
    )
    return name, run_step("reviewer", prompt, step_id=step_id(index, name), output=VERDICT, after=[counted])


with ThreadPoolExecutor(max_workers=inputs["workers"]) as pool:
    reviews = dict(pool.map(review, enumerate(files, start=1)))

# Fan in: one more agent step sees every verdict (its edges come from the review handles).
verdicts = {name: handle.value for name, handle in reviews.items() if handle.ok}
listed = "\n".join(f"- {name}: {value['verdict']}: {value['summary']}" for name, value in sorted(verdicts.items()))
combined = run_step(
    "reviewer",
    "Combine these file reviews into a one-line summary for the team:\n" + listed,
    step_id="combine",
    after=list(reviews.values()),
)

emit_output(
    {
        "files": {
            name: {"lines": lines.get(name, 0), **(verdicts.get(name) or {"verdict": "unreviewed", "summary": ""})}
            for name in files
        },
        "revise": [name for name in files if verdicts.get(name, {}).get("verdict") == "revise"],
        "summary": combined.output if combined.ok else "",
    }
)
