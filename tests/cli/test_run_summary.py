"""What `rho-notebook run` prints in text mode: an allowed failure says it was allowed, and the run
ends with a short result summary (each node's state and its validated output)."""

from __future__ import annotations

from tests.cli.runhelp import plan_id
from tests.conftest import Project, star

C = "timeout_seconds = 30, max_output_bytes = 100000"


def test_text_run_marks_allowed_failures_and_ends_with_a_result_summary(project: Project) -> None:
    project.write(
        "wf.star",
        star(
            f"""
            return workflow(name = "sum", nodes = [
                command(name = "count", argv = ["python3", "-c", "print('{{\\"n\\": 3, \\"tags\\": [\\"a\\", \\"b\\"]}}')"],
                        output = schema.stdout_json(schema.record({{"n": schema.integer(), "tags": schema.list(schema.string())}})), {C}),
                command(name = "flaky", argv = ["false"], allow_failure = True, {C}),
                command(name = "strict", argv = ["false"], needs = ["count", "flaky"], when = condition.equals(status("flaky"), "success"), {C}),
                command(name = "after", argv = ["true"], needs = ["count"], {C}),
            ])
            """
        ),
    )
    result = project.cli("run", plan_id(project), "--yes")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    [flaky] = [ln for ln in lines if ln.startswith("[") and " flaky " in ln and "failure" in ln]
    assert "failure (allowed)" in flaky and "exited with code 1" in flaky
    outcome = next(i for i, ln in enumerate(lines) if ln.startswith("run ") and "  outcome success" in ln)
    summary = lines[outcome + 1 :]
    assert summary, result.stdout
    text = "\n".join(summary)
    assert any(ln.split()[:2] == ["count", "success"] and '{"n": 3, "tags": ["a", "b"]}' in ln for ln in summary), text
    assert any(ln.split()[:3] == ["flaky", "failure", "(allowed)"] for ln in summary), text
    assert any(ln.split()[:2] == ["strict", "skipped"] for ln in summary), text
    assert any(ln.split()[:2] == ["after", "success"] for ln in summary), text


def test_jsonl_run_prints_no_summary(project: Project) -> None:
    project.write("wf.star", star(f'return workflow(name = "j", nodes = [command(name = "a", argv = ["true"], {C})])'))
    result = project.cli("run", plan_id(project), "--yes", "--output", "jsonl")
    assert result.returncode == 0 and all(line.startswith("{") for line in result.stdout.splitlines())
