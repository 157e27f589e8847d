# docs/examples/porting/cao_fanout.py
from concurrent.futures import ThreadPoolExecutor

from rho_notebook.script import RunStopped, emit_output, get_inputs, run_step

INPUTS = {"names": {"type": "string", "required": False, "default": "alpha beta gamma"}}


def summarize(name):
    try:
        h = run_step(
            "reviewer",
            f"Summarize {name}. Return the summary only.",
            step_id=f"summarize:{name}",  # STABLE, explicit step_id (required)
        )
    except RunStopped:  # a halt, a divergence or a cancel: never absorb it
        raise
    except ValueError as exc:  # the runner refused the call (an unknown agent, a bad id)
        return name, f"ERROR: {exc}"
    if not h.ok:  # per-unit tolerance: a failed step returns a handle, it does not raise
        return name, f"ERROR: {h.message}"
    return name, h.output


items = sorted(get_inputs()["names"].split())  # sorted() -> stable item -> step_id map
with ThreadPoolExecutor(max_workers=2) as pool:  # 2 is a good default for agent steps
    results = dict(pool.map(summarize, items))
emit_output(results)
