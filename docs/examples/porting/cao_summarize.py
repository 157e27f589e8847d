# docs/examples/porting/cao_summarize.py
from rho_notebook.script import emit_output, get_inputs, run_step

INPUTS = {
    "target_file": {"type": "path", "required": True},
    "max_points": {"type": "int", "required": False, "default": 3},
    "verbose": {"type": "bool", "required": False, "default": False},
}

inputs = get_inputs()  # {} when nothing was declared
target_file = inputs["target_file"]  # canonical absolute path, inside the workspace
max_points = inputs.get("max_points", 3)

review = run_step(
    "reviewer",
    f"Summarize {target_file} in {max_points} bullet points. Return the summary only.",
)
emit_output({"summary": review.output})
