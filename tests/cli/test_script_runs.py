"""Script runs through the real CLI: replay, divergence, halts and ``--decide`` after an owner is
SIGKILLed, a fan-out of 8 steps resumed after a crash, and cancel.

Every step is a real command step (``run_command``) that appends a line to its own side-effect
file, so a step that ran again would show; the owner is the process ``rho-notebook run``/``resume``
starts and follows (its pid is in the run's ``mutation.lock``), killed with SIGKILL while a step's
process runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.store.journal import read_journal
from tests.cli.runhelp import kill_owner, status, wait_for_event
from tests.conftest import REPO, Project

HEAD = """\
import os, sys
from pathlib import Path
from rho_notebook.script import emit_output, run_command

def sh(command, **options):
    return run_command(argv=["sh", "-c", command], timeout_seconds=60, max_output_bytes=10000, **options)

"""


def write_script(project: Project, body: str, name: str = "flow.py") -> str:
    project.write(name, HEAD + body)
    (project.root / "effects").mkdir(exist_ok=True)
    return name


def effects(project: Project, name: str) -> int:
    path = project.root / "effects" / f"{name}.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


def journal(project: Project, run_id: str) -> list[dict[str, Any]]:
    return list(read_journal(project.home / "workflows" / "runs" / run_id / "events.jsonl").events)


def kinds(project: Project, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [record for record in journal(project, run_id) if record["kind"] == kind]


def run(project: Project, script: str, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    result = project.cli("run", script, "--yes", "--output", "jsonl", *args)
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert lines, result.stderr
    return result, str(lines[0]["run_id"])


def resume(project: Project, run_id: str, *args: str) -> subprocess.CompletedProcess[str]:
    return project.cli("resume", run_id, "--yes", *args)


def background(project: Project, *args: str) -> subprocess.Popen[str]:
    """``rho-notebook ARGS --output jsonl`` in its own session (it starts the run's owner and follows it)."""
    env = {**os.environ, "RHO_NOTEBOOK_HOME": str(project.home), "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "rho_notebook", *args, "--output", "jsonl"],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def kill_owner_when(project: Project, proc: subprocess.Popen[str], predicate: Any, *, ready: Any = None) -> str:
    """SIGKILL the owner once an event matching ``predicate`` was printed by the CLI following it
    (``proc``) and ``ready()`` (when given) holds; the CLI then ends. Returns the run ID."""
    run_id, _ = wait_for_event(proc, predicate)
    if ready is not None:
        for _ in range(600):  # process_started comes before the step's shell has done anything
            if ready():
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the step never got ready")
    kill_owner(project, run_id)
    proc.wait(timeout=30)
    if proc.stdout is not None:
        proc.stdout.close()
    if proc.stderr is not None:
        proc.stderr.close()
    return run_id


def started(node: str, attempt: int) -> Any:
    return lambda r: r.get("kind") == "process_started" and r.get("node") == node and r.get("attempt") == attempt


def test_resume_replays_stored_results_without_launching(project: Project) -> None:
    script = write_script(
        project,
        """\
first = sh("echo ran >> effects/first.log; echo one")
second = sh("echo ran >> effects/second.log; echo two", step_id="second")
flaky = sh("echo ran >> effects/flaky.log; [ -f go ]", step_id="flaky")
if not Path("go").exists():
    sys.exit(3)
emit_output({"first": first.output, "second": second.output, "replayed": [first.replayed, second.replayed]})
""",
    )
    result, run_id = run(project, script)
    assert result.returncode == 1
    assert status(project, run_id)["outcome"] == "failure"
    assert (effects(project, "first"), effects(project, "second")) == (1, 1)
    assert status(project, run_id)["nodes"]["flaky"]["state"] == "failure"

    (project.root / "go").write_text("")
    resumed = resume(project, run_id)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    state = status(project, run_id)
    assert state["outcome"] == "success"
    assert (effects(project, "first"), effects(project, "second")) == (1, 1)  # nothing ran again
    assert effects(project, "flaky") == 2  # a step that settled as a failure is executed again
    assert state["nodes"]["flaky"]["attempt"] == 2 and state["nodes"]["flaky"]["state"] == "success"
    assert [(r["node"], r["attempt"]) for r in kinds(project, run_id, "step_replayed")] == [
        ("call-1", 1),
        ("second", 1),
    ]
    assert [r["value"] for r in kinds(project, run_id, "script_output")] == [
        {"first": "one\n", "second": "two\n", "replayed": [True, True]}
    ]


def test_a_changed_step_diverges_naming_both_digests(project: Project) -> None:
    script = write_script(
        project,
        """\
word = Path("word.txt").read_text().strip()
sh("echo ran >> effects/say.log; echo " + word, step_id="say")
if not Path("go").exists():
    sys.exit(3)
""",
    )
    project.write("word.txt", "hello\n")
    _, run_id = run(project, script)
    stored = kinds(project, run_id, "node_launched")[0]["step"]["digest"]

    project.write("word.txt", "goodbye\n")  # the script now calls step "say" with another argv
    (project.root / "go").write_text("")
    resumed = resume(project, run_id)
    assert resumed.returncode == 1
    diverged = kinds(project, run_id, "step_diverged")
    assert [(r["node"], r["stored_digest"]) for r in diverged] == [("say", stored)]
    new = diverged[0]["digest"]
    assert new != stored
    completed = kinds(project, run_id, "run_completed")[-1]
    assert completed["outcome"] == "failure"
    assert "say" in completed["message"] and stored in completed["message"] and new in completed["message"]
    assert stored in resumed.stdout and new in resumed.stdout
    assert effects(project, "say") == 1


def test_a_step_whose_executable_changed_since_it_ran_diverges_rather_than_replays(project: Project) -> None:
    project.write("tool.sh", "#!/bin/sh\necho ran >> effects/tool.log\necho first\n")
    os.chmod(project.root / "tool.sh", 0o755)
    script = write_script(
        project,
        """\
print(run_command(["./tool.sh"], step_id="tool", timeout_seconds=60, max_output_bytes=1000).output)
if not Path("go").exists():
    sys.exit(3)
""",
    )
    _, run_id = run(project, script)
    launched = kinds(project, run_id, "node_launched")[0]["step"]
    assert launched["args"]["argv"] == ["./tool.sh"], "the request is journaled: a later execution checks it"

    project.write("tool.sh", "#!/bin/sh\necho ran >> effects/tool.log\necho second\n")  # same call, new program
    (project.root / "go").write_text("")
    resumed = resume(project, run_id)
    assert resumed.returncode == 1
    diverged = kinds(project, run_id, "step_diverged")
    assert [(r["node"], r["stored_digest"]) for r in diverged] == [("tool", launched["digest"])]
    assert kinds(project, run_id, "step_replayed") == []
    assert effects(project, "tool") == 1


SLOW = """\
slow = sh("echo ran >> effects/slow.log; [ -f release ] || sleep 60; echo slow-done", step_id="slow")
after = sh("echo ran >> effects/after.log; echo after", step_id="after")
emit_output({"slow": slow.output, "state": slow.state, "replayed": slow.replayed})
"""


def test_a_step_lost_with_its_owner_halts_until_decided_and_each_decision_is_one_attempt(project: Project) -> None:
    script = write_script(project, SLOW)
    run_id = kill_owner_when(
        project,
        background(project, "run", script, "--yes"),
        started("slow", 1),
        ready=lambda: effects(project, "slow") == 1,
    )
    assert effects(project, "slow") == 1

    halted = resume(project, run_id)
    assert halted.returncode == 1
    state = status(project, run_id)
    assert state["lifecycle"] == "needs_decision"
    assert state["halted"] == [{"step": "slow", "why": "started and never settled"}]
    assert "slow" in halted.stdout and "started and never settled" in halted.stdout
    assert "--decide slow=rerun|skip" in halted.stdout
    assert effects(project, "slow") == 1  # a halt runs nothing
    assert kinds(project, run_id, "orphan_stopped")  # the lost step's process tree did not outlive its owner
    assert kinds(project, run_id, "needs_recovery") == []  # script runs never need --recover-uncertain

    # the decision authorises one attempt; that attempt is lost too: the next resume asks again
    kill_owner_when(
        project,
        background(project, "resume", run_id, "--yes", "--decide", "slow=rerun"),
        started("slow", 2),
        ready=lambda: effects(project, "slow") == 2,
    )
    assert effects(project, "slow") == 2
    assert [r["decision"] for r in kinds(project, run_id, "decision_recorded")] == ["rerun"]
    again = resume(project, run_id)
    assert again.returncode == 1
    assert status(project, run_id)["halted"] == [{"step": "slow", "why": "started and never settled"}]
    assert effects(project, "slow") == 2

    (project.root / "release").write_text("")
    done = resume(project, run_id, "--decide", "slow=rerun")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (effects(project, "slow"), effects(project, "after")) == (3, 1)
    assert kinds(project, run_id, "script_output")[-1]["value"] == {
        "slow": "slow-done\n",
        "state": "success",
        "replayed": False,
    }


def test_skip_accepts_the_stored_result_and_the_script_goes_on(project: Project) -> None:
    script = write_script(project, SLOW)
    run_id = kill_owner_when(
        project,
        background(project, "run", script, "--yes"),
        started("slow", 1),
        ready=lambda: effects(project, "slow") == 1,
    )
    assert resume(project, run_id).returncode == 1  # halted

    done = resume(project, run_id, "--decide", "slow=skip")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (effects(project, "slow"), effects(project, "after")) == (1, 1)  # slow never ran again
    replayed = kinds(project, run_id, "step_replayed")
    assert [(r["node"], r["attempt"], r.get("decision")) for r in replayed] == [("slow", 1, "skip")]
    assert kinds(project, run_id, "script_output")[-1]["value"] == {"slow": None, "state": "skipped", "replayed": True}


def test_skip_of_a_failed_manual_step_returns_its_stored_output(project: Project) -> None:
    script = write_script(
        project,
        """\
check = sh("echo ran >> effects/check.log; echo checked; [ -f fixed ]", step_id="check", recovery="manual")
emit_output({"output": check.output, "state": check.state})
if not Path("fixed").exists():
    sys.exit(3)  # the outcome follows the script: a script that went on from the failure would succeed
""",
    )
    first, run_id = run(project, script)
    assert first.returncode == 1, first.stdout + first.stderr
    assert kinds(project, run_id, "script_output")[-1]["value"] == {"output": "checked\n", "state": "failure"}
    halted = resume(project, run_id)
    assert halted.returncode == 1
    assert 'recovery="manual"' in status(project, run_id)["halted"][0]["why"]

    (project.root / "fixed").write_text("")
    done = resume(project, run_id, "--decide", "check=skip")
    assert effects(project, "check") == 1
    assert kinds(project, run_id, "script_output")[-1]["value"] == {"output": "checked\n", "state": "failure"}
    assert done.returncode == 0, done.stdout + done.stderr  # skipped by decision counts as decided
    check = status(project, run_id)["nodes"]["check"]
    assert (check["state"], check["shown"]) == ("failure", "failure_handled")  # the script went on from it


def test_decide_names_a_step_of_the_run(project: Project) -> None:
    script = write_script(project, SLOW)
    run_id = kill_owner_when(project, background(project, "run", script, "--yes"), started("slow", 1))
    assert resume(project, run_id).returncode == 1
    wrong = resume(project, run_id, "--decide", "nosuch=rerun")
    assert wrong.returncode != 0
    assert "nosuch" in wrong.stderr and "halted steps: slow" in wrong.stderr
    bad = resume(project, run_id, "--decide", "slow=maybe")
    assert bad.returncode == 2 and "STEP=rerun" in bad.stderr


FAN = """\
from concurrent.futures import ThreadPoolExecutor

def one(i):
    gate = "" if i < 4 else "[ -f release ] || sleep 60; "
    handle = sh(f"echo ran >> effects/fan-{i}.log; {gate}echo {i}", step_id=f"fan-{i}", recovery="rerun")
    return f"fan-{i}", handle.output, handle.replayed

with ThreadPoolExecutor(max_workers=8) as pool:
    found = list(pool.map(one, range(8)))
emit_output({key: [output, replayed] for key, output, replayed in found})
"""


def test_a_fan_out_of_eight_steps_replays_by_key_after_a_crash(project: Project) -> None:
    script = write_script(project, FAN)
    proc = background(project, "run", script, "--yes")
    finished: set[str] = set()
    launched: set[str] = set()

    def midway(record: dict[str, Any]) -> bool:
        if record.get("kind") == "node_finished":
            finished.add(record["node"])
        if record.get("kind") == "process_started":
            launched.add(record["node"])
        return len(finished) == 4 and len(launched) == 8

    run_id = kill_owner_when(
        project, proc, midway, ready=lambda: all(effects(project, f"fan-{i}") == 1 for i in range(8))
    )
    assert finished == {f"fan-{i}" for i in range(4)}

    (project.root / "release").write_text("")
    done = resume(project, run_id)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [effects(project, f"fan-{i}") for i in range(8)] == [1, 1, 1, 1, 2, 2, 2, 2]
    replayed = sorted(r["node"] for r in kinds(project, run_id, "step_replayed"))
    assert replayed == [f"fan-{i}" for i in range(4)]
    assert kinds(project, run_id, "script_output")[-1]["value"] == {f"fan-{i}": [f"{i}\n", i < 4] for i in range(8)}


def test_cancel_stops_the_script_and_its_running_step(project: Project) -> None:
    script = write_script(project, SLOW)
    proc = background(project, "run", script, "--yes")
    run_id, _ = wait_for_event(proc, started("slow", 1))
    cancelled = project.cli("cancel", run_id, "--wait", "30")
    assert cancelled.returncode == 0, cancelled.stderr
    assert proc.wait(timeout=30) == 1
    state = status(project, run_id)
    assert (state["lifecycle"], state["outcome"]) == ("completed", "cancellation")
    assert state["nodes"]["slow"]["state"] == "cancellation"
    assert "after" not in state["nodes"]
    requested = [r["request_id"] for r in kinds(project, run_id, "cancel_requested")]
    assert requested and [r["request_id"] for r in kinds(project, run_id, "cancel_acknowledged")] == requested
    assert kinds(project, run_id, "run_completed")[-1]["outcome"] == "cancellation"
    assert kinds(project, run_id, "script_exited")[0]["exit"]["kind"] == "cancelled"


def test_the_script_is_a_launch_plan_mode_denies_it(project: Project) -> None:
    script = write_script(project, SLOW)
    result, run_id = run(project, script, "--mode", "plan")
    assert result.returncode == 1
    completed = kinds(project, run_id, "run_completed")[-1]
    assert completed["outcome"] == "denial" and "plan" in completed["message"]
    assert kinds(project, run_id, "script_launched") == []
    assert effects(project, "slow") == 0


def test_supervised_script_launch_asks_and_fails_closed_without_an_answer(project: Project) -> None:
    script = write_script(project, SLOW)
    result, run_id = run(project, script, "--mode", "supervised", "--approval-timeout", "0")
    assert result.returncode == 1
    asked = kinds(project, run_id, "approval_requested")
    assert [(r["node"], r["approval"]) for r in asked] == [("(script)", "launch")]
    facts = asked[0]["facts"]
    assert facts["script"] == "//flow.py" and facts["sha256"].startswith("sha256:")
    assert {"interpreter", "interpreter_sha256", "cwd", "environment"} <= set(facts)
    assert kinds(project, run_id, "run_completed")[-1]["outcome"] == "denial"
    assert effects(project, "slow") == 0


def test_supervised_script_and_command_steps_ask_and_approvals_carry_to_the_next_run(project: Project) -> None:
    script = write_script(project, 'sh("echo ran >> effects/asked.log", step_id="asked")\n')
    proc = background(project, "run", script, "--yes", "--mode", "supervised", "--approval-timeout", "60")
    for node in ("(script)", "asked"):
        run_id, request = wait_for_event(
            proc, lambda r, n=node: r.get("kind") == "approval_requested" and r["node"] == n
        )
        decided = project.cli("approve", run_id, request["request_id"])
        assert decided.returncode == 0, decided.stderr
    assert proc.wait(timeout=60) == 0
    assert effects(project, "asked") == 1

    # the same launch facts approved in this workspace before: nobody is asked again
    result, again = run(project, script, "--mode", "supervised", "--approval-timeout", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    assert [r["node"] for r in kinds(project, again, "approval_carried")] == ["(script)", "asked"]
    assert kinds(project, again, "approval_requested") == []
    assert effects(project, "asked") == 2


def test_the_channel_answers_requests_sent_together_in_order_whether_answered_at_once_or_later(
    tmp_path: Path,
) -> None:
    import asyncio
    import socket

    from rho_notebook.runtime.script_channel import ScriptChannel

    def exchange(address: str, data: bytes, answers: int) -> tuple[list[dict[str, Any]], bytes]:
        """Send ``data`` at once, half-close, and read ``answers`` lines and what follows them."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(address)
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            with sock.makefile("rb") as stream:
                lines = [json.loads(stream.readline()) for _ in range(answers)]
                return lines, stream.read()

    async def main() -> None:
        def handler(request: dict[str, Any]) -> dict[str, Any] | Any:
            if request.get("wait"):

                async def later() -> dict[str, Any]:
                    await asyncio.sleep(0.05)
                    return {"ok": True, "n": request["n"]}

                return later()
            if request.get("boom"):
                raise RuntimeError("driver bug")
            return {"ok": True, "n": request["n"]}

        run_folder = tmp_path / "run"
        run_folder.mkdir(mode=0o700)
        channel = ScriptChannel(run_folder, handler)
        await channel.start()
        try:

            def line(**fields: Any) -> bytes:
                return (json.dumps({"token": channel.token, **fields}) + "\n").encode()

            data = line(n=0) + line(n=1, wait=True) + line(n=2) + line(boom=True) + line(n=4)
            answers, rest = await asyncio.to_thread(exchange, channel.address, data, 5)
            assert [a.get("n") for a in answers] == [0, 1, 2, None, 4], "in the order they were sent"
            assert answers[3]["error"] == "internal" and "driver bug" in answers[3]["message"]
            assert rest == b"", "closed once the client's end was answered"
            answers, rest = await asyncio.to_thread(exchange, channel.address, line(n=5) + b'{"token": "', 2)
            assert answers[0] == {"ok": True, "n": 5}
            assert answers[1]["error"] == "invalid" and "newline" in answers[1]["message"]
            assert rest == b""
        finally:
            await channel.close()

    asyncio.run(main())


def test_a_connection_holds_a_bounded_amount_while_its_request_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a request waits for its answer the connection goes on reading (no pause per step) and
    serves nothing; past MAX_HELD_BYTES it stops reading until the answer is written, then serves
    what it held in order."""
    import asyncio
    import socket

    from rho_notebook.runtime import script_channel

    monkeypatch.setattr(script_channel, "MAX_HELD_BYTES", 4096)

    async def main() -> None:
        release = asyncio.Event()
        seen: list[int] = []

        def handler(request: dict[str, Any]) -> dict[str, Any] | Any:
            seen.append(request["n"])
            if request["n"] == 0:

                async def later() -> dict[str, Any]:
                    await release.wait()
                    return {"ok": True, "n": 0}

                return later()
            return {"ok": True, "n": request["n"]}

        run_folder = tmp_path / "run"
        run_folder.mkdir(mode=0o700)
        channel = script_channel.ScriptChannel(run_folder, handler)
        await channel.start()
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.connect(channel.address)
            sock.setblocking(False)

            def line(n: int, pad: int = 0) -> bytes:
                return (json.dumps({"token": channel.token, "n": n, "pad": "x" * pad}) + "\n").encode()

            loop = asyncio.get_running_loop()
            await loop.sock_sendall(sock, line(0))
            while not seen:
                await asyncio.sleep(0.01)
            (connection,) = channel.connections
            transport = connection._transport
            assert transport is not None
            await loop.sock_sendall(sock, line(1))
            await asyncio.sleep(0.05)
            assert seen == [0] and transport.is_reading(), "read while waiting, not served"
            await loop.sock_sendall(sock, line(2, pad=8192))
            for _ in range(100):
                if not transport.is_reading():
                    break
                await asyncio.sleep(0.01)
            assert not transport.is_reading(), "past MAX_HELD_BYTES: not read until answered"
            assert seen == [0]
            release.set()
            data = b""
            while data.count(b"\n") < 3:
                data += await loop.sock_recv(sock, 65536)
            assert [json.loads(x)["n"] for x in data.splitlines()] == [0, 1, 2], "in the order they were sent"
            assert seen == [0, 1, 2] and transport.is_reading()
        finally:
            sock.close()
            await channel.close()

    asyncio.run(main())


def test_the_channel_refuses_a_wrong_token_and_an_oversized_request_and_serves_connections_at_once(
    tmp_path: Path,
) -> None:
    import asyncio
    import socket

    from rho_notebook.runtime.script_channel import MAX_REQUEST_BYTES, ScriptChannel

    def ask(address: str, line: bytes) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(address)
            sock.sendall(line)
            with sock.makefile("rb") as stream:
                answer: dict[str, Any] = json.loads(stream.readline())
                return answer

    def ask_many(address: str, token: str, count: int) -> list[dict[str, Any]]:
        """``count`` requests on one connection, each answered before the next is sent; then a
        refused one, after which the runner closes the connection."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(address)
            answers: list[dict[str, Any]] = []
            with sock.makefile("rb") as stream:
                for n in range(count):
                    sock.sendall((json.dumps({"token": token, "op": "x", "n": n}) + "\n").encode())
                    answers.append(json.loads(stream.readline()))
                sock.sendall(b'{"token": "nope", "op": "x"}\n')
                assert json.loads(stream.readline())["error"] == "refused"
                assert stream.readline() == b"", "closed after the refusal"
            return answers

    async def main() -> None:
        both_inside = asyncio.Event()
        inside = 0

        async def handler(request: dict[str, Any]) -> dict[str, Any]:
            nonlocal inside
            if "n" in request:
                return {"ok": True, "echo": request}
            inside += 1
            if inside == 2:
                both_inside.set()
            await asyncio.wait_for(both_inside.wait(), 10)  # two connections are served at once
            return {"ok": True, "echo": request}

        run_folder = tmp_path / ("deep" * 30)  # longer than a socket address may be
        run_folder.mkdir(mode=0o700)
        channel = ScriptChannel(run_folder, handler)
        await channel.start()
        try:
            assert oct(channel.socket_path.stat().st_mode & 0o777) == "0o600"
            assert oct(channel.folder.stat().st_mode & 0o777) == "0o700"
            good = (json.dumps({"token": channel.token, "op": "x"}) + "\n").encode()
            answers = await asyncio.gather(
                asyncio.to_thread(ask, channel.address, good), asyncio.to_thread(ask, channel.address, good)
            )
            assert answers == [{"ok": True, "echo": {"op": "x"}}] * 2
            many = await asyncio.to_thread(ask_many, channel.address, channel.token, 3)
            assert many == [{"ok": True, "echo": {"op": "x", "n": n}} for n in range(3)], "in order, one connection"
            wrong = await asyncio.to_thread(ask, channel.address, b'{"token": "nope", "op": "x"}\n')
            assert wrong["error"] == "refused"
            huge = b'{"token": "' + b"x" * (MAX_REQUEST_BYTES + 10) + b'"}\n'
            try:
                refused = await asyncio.to_thread(ask, channel.address, huge)
            except (BrokenPipeError, ConnectionResetError, json.JSONDecodeError):
                refused = {"error": "invalid"}  # closed before the client finished sending: also refused
            assert refused["error"] == "invalid"
            assert inside == 2  # neither reached the handler
        finally:
            await channel.close()
        assert not channel.socket_path.exists()

    asyncio.run(main())
