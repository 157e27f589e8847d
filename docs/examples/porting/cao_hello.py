# docs/examples/porting/cao_hello.py
from rho_notebook.script import emit_output, run_step

# Step 1: a developer writes a note.
note = run_step("developer", "Write a one-line hello note. Return it only.")

# Step 2: a reviewer critiques it (read-only role: it READS and RETURNS).
review = run_step("reviewer", f"Critique this note in one line: {note.output}")

emit_output({"note": note.output, "review": review.output})
