"""The script authoring API (``rho_notebook.script``) and the harness's script mode, for real.

Every script here runs as a script run runs it: a fresh ``python -I`` interpreter launched on the
harness in ``--script`` mode, with ``sys.path`` reduced to the standard library (so the shim
must work with nothing else installed, reaching rho_notebook through the request's
``package_dir``) and the channel's socket and token in its environment. A small Unix-socket
server in the test speaks the runner's side of the protocol and records every request.
"""

from __future__ import annotations

import json
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rho_notebook.model.schema import (
    BoolSchema,
    EnumSchema,
    IntegerSchema,
    ListSchema,
    NullSchema,
    OptionalSchema,
    RecordSchema,
    StringSchema,
)
from rho_notebook.planning.normalize import to_schema
from rho_notebook.script import schema
from rho_notebook.script._channel import request_fingerprint
from rho_notebook.source.pymodules import HARNESS_PATH

ROOT = Path(__file__).resolve().parents[2]
STDLIB_PATH = [p for p in sys.path if p and "site-packages" not in p and not p.startswith(str(ROOT))]
"""This interpreter's own path without site-packages and the checkout: the standard library only."""
TOKEN = "ab" * 32

Answer = Callable[[dict[str, Any]], dict[str, Any]]


def default_answer(request: dict[str, Any]) -> dict[str, Any]:
    """The runner's happy path: every step succeeds with an output naming its key."""
    if request["op"] == "inputs":
        return {"ok": True, "inputs": {"target": "/w/README.md", "count": 3}}
    if request["op"] == "emit":
        return {"ok": True}
    key = request["key"]
    return {"ok": True, "key": key, "state": "success", "output": f"out-{key}", "value": None, "replayed": False}


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    channel: Channel


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        """JSON lines, answered in order, until the client closes (or a refusal)."""
        channel = self.server.channel
        with channel.lock:
            channel.connections += 1
        while line := self.rfile.readline():
            request = json.loads(line)
            if request.get("op") == "replayed":
                with channel.lock:
                    channel.notices.append(request)
                continue
            if request.get("op") == "offers" and request.get("token") == channel.token:
                self.wfile.write((json.dumps({"ok": True, "offers": channel.offers}) + "\n").encode())
                continue
            with channel.lock:
                channel.requests.append(request)
            if request.get("token") != channel.token:
                refused = {"ok": False, "error": "refused", "message": "wrong token"}
                self.wfile.write((json.dumps(refused) + "\n").encode())
                return
            self.wfile.write((json.dumps(channel.answer(request)) + "\n").encode())
            if channel.one_request_per_connection:
                return


@dataclass
class Channel:
    """The runner's end of the private channel, in this test process."""

    folder: Path
    token: str = TOKEN
    answer: Answer = default_answer
    requests: list[dict[str, Any]] = field(default_factory=list)
    connections: int = 0
    """How many connections the script opened."""
    one_request_per_connection: bool = False
    """Close each connection after its first answer (as a runner does after a refusal)."""
    offers: dict[str, Any] = field(default_factory=dict)
    """The replay offers the runner makes (``{"op": "offers"}`` is answered with these and is not
    one of ``requests``)."""
    notices: list[dict[str, Any]] = field(default_factory=list)
    """Lines the runner does not answer (``{"op": "replayed"}``)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def path(self) -> Path:
        return self.folder / "channel.sock"

    def steps(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["op"] == "step"]

    def environ(self, *, token: str | None = None) -> dict[str, str]:
        return {"RHO_SCRIPT_CHANNEL": str(self.path), "RHO_SCRIPT_TOKEN": token or self.token}


@pytest.fixture
def channel() -> Iterator[Channel]:
    folder = Path(tempfile.mkdtemp(prefix="rho-ch-", dir="/tmp"))  # a socket path has ~100 characters
    made = Channel(folder=folder)
    server = _Server(str(made.path), _Handler)
    server.channel = made
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield made
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
        shutil.rmtree(folder, ignore_errors=True)


def run_script(
    tmp_path: Path,
    text: str,
    *,
    environ: dict[str, str] | None,
    label: str = "//scripts/flow.py",
    package_dir: str | None = str(ROOT),
) -> subprocess.CompletedProcess[str]:
    """Run ``text`` as a script run runs it; its stdout, stderr and exit code."""
    modules = tmp_path / "modules"
    script = modules / label.removeprefix("//")
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(textwrap.dedent(text), encoding="utf-8")
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps({"script": label, "sys_path": STDLIB_PATH, "site_dirs": [], "package_dir": package_dir}),
        encoding="utf-8",
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(environ or {})}
    argv = [sys.executable, "-I", str(HARNESS_PATH), "--script", str(modules), str(request)]
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)


def ok(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done.stdout.splitlines()


# -- keys -----------------------------------------------------------------------------------------


def test_steps_without_ids_get_call_n_in_call_order(tmp_path: Path, channel: Channel) -> None:
    lines = ok(
        run_script(
            tmp_path,
            """
            from rho_notebook.script import run_command, run_model, run_step

            a = run_command(["echo", "one"], timeout_seconds=10, max_output_bytes=1000)
            b = run_step("reviewer", "look", step_id="review")
            c = run_step("reviewer", "again", recovery="rerun")
            d = run_model([{"role": "user", "content": "hi"}], provider="local", model="m1", step_id=None)
            for h in (a, b, c, d):
                print(h.step_id, h.state, h.output, h.replayed, h.ok)
            """,
            environ=channel.environ(),
        )
    )
    assert lines == [
        "call-1 success out-call-1 False True",
        "review success out-review False True",
        "call-2 success out-call-2 False True",
        "call-3 success out-call-3 False True",
    ]
    assert channel.steps() == [
        {
            "token": TOKEN,
            "op": "step",
            "key": "call-1",
            "kind": "command",
            "args": {"argv": ["echo", "one"], "cwd": None, "timeout_seconds": 10, "max_output_bytes": 1000},
            "recovery": None,
            "after": [],
            "where": "//scripts/flow.py:4",
        },
        {
            "token": TOKEN,
            "op": "step",
            "key": "review",
            "kind": "agent",
            "args": {"agent": "reviewer", "prompt": "look", "output": None},
            "recovery": None,
            "after": [],
            "where": "//scripts/flow.py:5",
        },
        {
            "token": TOKEN,
            "op": "step",
            "key": "call-2",
            "kind": "agent",
            "args": {"agent": "reviewer", "prompt": "again", "output": None},
            "recovery": "rerun",
            "after": [],
            "where": "//scripts/flow.py:6",
        },
        {
            "token": TOKEN,
            "op": "step",
            "key": "call-3",
            "kind": "model",
            "args": {
                "messages": [{"role": "user", "content": "hi"}],
                "provider": "local",
                "model": "m1",
                "tools": None,
                "output": None,
            },
            "recovery": None,
            "after": [],
            "where": "//scripts/flow.py:7",
        },
    ]


def test_author_step_ids_are_checked_before_anything_is_sent(tmp_path: Path, channel: Channel) -> None:
    lines = ok(
        run_script(
            tmp_path,
            """
            from rho_notebook.script import run_step

            for bad in ["-lead", ".hidden", "a" * 129, "has space", "call-7", "", "x#y"]:
                try:
                    run_step("reviewer", "p", step_id=bad)
                except ValueError as err:
                    print("ValueError", repr(bad) in str(err))
            try:
                run_step("reviewer", "p", step_id=7)
            except TypeError as err:
                print("TypeError", str(err))
            run_step("reviewer", "p", step_id="fine_id-2")
            run_step("reviewer", "p", step_id="Summarize:a.md@v2/part-1")
            try:
                run_step("reviewer", "p", step_id="fine_id-2")
            except ValueError as err:
                print("again:", str(err))
            print(run_step("reviewer", "p").step_id)
            """,
            environ=channel.environ(),
        )
    )
    assert lines[:7] == ["ValueError True"] * 7
    assert lines[7] == "TypeError step_id must be a string, got int 7"
    assert lines[8].startswith("again: step id 'fine_id-2' is already used by an earlier step call of this run")
    assert lines[9] == "call-1", "a refused call uses no call-N number"
    assert [r["key"] for r in channel.steps()] == ["fine_id-2", "Summarize:a.md@v2/part-1", "call-1"]


def test_eight_concurrent_steps_with_explicit_ids_are_all_in_flight_at_once(tmp_path: Path, channel: Channel) -> None:
    barrier = threading.Barrier(8, timeout=60)

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        barrier.wait()  # every one of the 8 calls must be open at the same time to get past this
        key = request["key"]
        argv = request["args"]["argv"]
        return {"ok": True, "key": key, "state": "success", "output": argv[-1], "value": None, "replayed": False}

    channel.answer = answer
    lines = ok(
        run_script(
            tmp_path,
            """
            from concurrent.futures import ThreadPoolExecutor
            from rho_notebook.script import run_command

            def review(n):
                h = run_command(["echo", f"item {n}"], step_id=f"review-{n}", timeout_seconds=5, max_output_bytes=100)
                return h.step_id, h.output

            with ThreadPoolExecutor(max_workers=8) as pool:
                for key, out in pool.map(review, range(8)):
                    print(key, out)
            """,
            environ=channel.environ(),
        )
    )
    assert lines == [f"review-{n} item {n}" for n in range(8)]
    assert sorted(r["key"] for r in channel.steps()) == sorted(f"review-{n}" for n in range(8))
    assert all(r["args"]["argv"] == ["echo", f"item {r['key'].split('-')[1]}"] for r in channel.steps())


# -- edges ----------------------------------------------------------------------------------------


def test_edges_come_from_handles_their_outputs_and_after(tmp_path: Path, channel: Channel) -> None:
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        answered = default_answer(request)
        if request.get("key") == "listing":
            answered["value"] = {"files": ["a.py", "b.py"]}
        return answered

    channel.answer = answer
    ok(
        run_script(
            tmp_path,
            """
            from rho_notebook.script import run_command, run_model, run_step

            limits = dict(timeout_seconds=10, max_output_bytes=1000)
            listing = run_command(["ls"], step_id="listing", **limits)
            run_step("reviewer", listing.output, step_id="by-output")
            run_command(["cat", listing], step_id="by-handle", **limits)
            run_step("reviewer", f"files: {listing.output}", step_id="formatted")
            run_step("reviewer", "p", step_id="explicit", after=[listing])
            run_model([{"role": "user", "content": "x", "data": listing.value}], provider="p", model="m", step_id="by-value")
            run_step("reviewer", "Review ls", step_id="equal-literal")
            last = run_step("reviewer", listing.output, step_id="both", after=listing)
            run_command(["echo", last.output, listing.output], step_id="two", after=[last], **limits)
            """,
            environ=channel.environ(),
        )
    )
    edges = {r["key"]: r["after"] for r in channel.steps()}
    assert edges == {
        "listing": [],
        "by-output": ["listing"],
        "by-handle": ["listing"],
        "formatted": [],
        "explicit": ["listing"],
        "by-value": ["listing"],
        "equal-literal": [],
        "both": ["listing"],
        "two": ["both", "listing"],
    }
    steps = {r["key"]: r["args"] for r in channel.steps()}
    assert steps["by-handle"]["argv"] == ["cat", {"step": "listing", "text": "out-listing"}], "step data, tagged"
    assert steps["two"]["argv"] == [
        "echo",
        {"step": "both", "text": "out-both"},
        {"step": "listing", "text": "out-listing"},
    ]
    assert steps["by-value"]["messages"][0]["data"] == {"files": ["a.py", "b.py"]}


# -- the runner's refusals --------------------------------------------------------------------------


def test_a_halt_and_a_divergence_raise_with_the_step_named(tmp_path: Path, channel: Channel) -> None:
    def answer(request: dict[str, Any]) -> dict[str, Any]:
        if request.get("key") == "deploy":
            return {"ok": False, "error": "decision_required", "step": "deploy", "why": "started and never settled"}
        if request.get("key") == "call-2":
            return {
                "ok": False,
                "error": "divergence",
                "step": "call-2",
                "stored_digest": "sha256:aa",
                "digest": "sha256:bb",
            }
        if request.get("key") == "call-3":
            return {"ok": False, "error": "cancelled"}
        if request.get("key") == "call-4":
            return {"ok": False, "error": "invalid", "message": "no agent 'nobody' in the catalog"}
        return default_answer(request)

    channel.answer = answer
    lines = ok(
        run_script(
            tmp_path,
            """
            from rho_notebook.script import (
                DecisionRequired, ReplayDivergenceError, RunCancelled, RunStopped, run_step,
            )

            try:
                run_step("ops", "deploy", step_id="deploy")
            except DecisionRequired as err:
                print("halt", err.step, "|", err.why, "|", isinstance(err, RunStopped), "|", err)
            run_step("ops", "first")
            try:
                run_step("ops", "second")
            except ReplayDivergenceError as err:
                print("diverged", err.step, err.stored_digest, err.digest, isinstance(err, RunStopped))
            try:
                run_step("ops", "third")
            except RunCancelled as err:
                print("cancelled", isinstance(err, RunStopped))
            try:
                run_step("nobody", "fourth")
            except ValueError as err:
                print("invalid", err)
            """,
            environ=channel.environ(),
        )
    )
    assert lines[0].startswith("halt deploy | started and never settled | True | step 'deploy' needs a decision")
    assert "--decide deploy=rerun" in lines[0] and "Do not catch this exception" in lines[0]
    assert lines[1:] == [
        "diverged call-2 sha256:aa sha256:bb True",
        "cancelled True",
        "invalid no agent 'nobody' in the catalog (step call at //scripts/flow.py:20)",
    ]


def test_an_uncaught_halt_ends_the_script_with_its_traceback(tmp_path: Path, channel: Channel) -> None:
    channel.answer = lambda request: {"ok": False, "error": "decision_required", "step": "call-1", "why": "manual"}
    done = run_script(
        tmp_path,
        """
        from rho_notebook.script import run_step

        print("before", flush=True)
        run_step("ops", "go")
        print("never")
        """,
        environ=channel.environ(),
    )
    assert done.returncode == 1
    assert done.stdout == "before\n"
    assert done.stderr.startswith("Traceback (most recent call last):\n")
    assert 'scripts/flow.py", line 5, in <module>' in done.stderr
    assert "runpy" not in done.stderr and "_py_harness" not in done.stderr, "the harness's own frames are left out"
    assert (
        done.stderr.rstrip()
        .splitlines()[-1]
        .startswith("rho_notebook.script._errors.DecisionRequired: step 'call-1' needs a decision (manual)")
    )


def test_the_shim_sends_the_token_and_a_refusal_is_an_error(tmp_path: Path, channel: Channel) -> None:
    text = """
        from rho_notebook.script import ChannelError, get_inputs

        try:
            print(sorted(get_inputs().items()))
        except ChannelError as err:
            print("refused:", err, isinstance(err, RuntimeError))
        """
    assert ok(run_script(tmp_path, text, environ=channel.environ())) == ["[('count', 3), ('target', '/w/README.md')]"]
    assert ok(run_script(tmp_path, text, environ=channel.environ(token="cd" * 32))) == [
        "refused: the rho-notebook runner refused the 'inputs' request: wrong token True"
    ]
    assert [r["token"] for r in channel.requests] == [TOKEN, "cd" * 32]


def test_each_thread_keeps_one_connection_for_all_its_requests(tmp_path: Path, channel: Channel) -> None:
    lines = ok(
        run_script(
            tmp_path,
            """
            import threading
            from rho_notebook.script import get_inputs, run_command

            get_inputs()
            for n in range(5):
                print(run_command(["echo", str(n)], timeout_seconds=5, max_output_bytes=100).step_id)

            def other():
                run_command(["echo", "x"], step_id="other", timeout_seconds=5, max_output_bytes=100)
                run_command(["echo", "y"], step_id="other-2", timeout_seconds=5, max_output_bytes=100)

            worker = threading.Thread(target=other)
            worker.start()
            worker.join()
            """,
            environ=channel.environ(),
        )
    )
    assert lines == [f"call-{n}" for n in range(1, 6)]
    assert len(channel.requests) == 8
    assert channel.connections == 2, "one connection for the main thread, one for the other thread"


def test_a_connection_the_runner_closed_is_replaced_and_the_request_sent_again(
    tmp_path: Path, channel: Channel
) -> None:
    channel.one_request_per_connection = True  # as a runner does after refusing a request
    lines = ok(
        run_script(
            tmp_path,
            """
            from rho_notebook.script import run_command

            for n in range(4):
                print(run_command(["echo", str(n)], timeout_seconds=5, max_output_bytes=100).output)
            """,
            environ=channel.environ(),
        )
    )
    assert lines == ["out-call-1", "out-call-2", "out-call-3", "out-call-4"]
    assert [r["key"] for r in channel.steps()] == ["call-1", "call-2", "call-3", "call-4"], (
        "each sent and answered once"
    )
    assert channel.connections == 4


def test_a_forked_child_opens_its_own_connection(tmp_path: Path, channel: Channel) -> None:
    lines = ok(
        run_script(
            tmp_path,
            """
            import os
            from rho_notebook.script import run_command

            print(run_command(["echo"], step_id="parent-1", timeout_seconds=5, max_output_bytes=100).output)
            child = os.fork()
            if child == 0:
                handle = run_command(["echo"], step_id="child", timeout_seconds=5, max_output_bytes=100)
                os._exit(0 if handle.output == "out-child" else 1)
            _, status = os.waitpid(child, 0)
            print("child", os.waitstatus_to_exitcode(status))
            print(run_command(["echo"], step_id="parent-2", timeout_seconds=5, max_output_bytes=100).output)
            """,
            environ=channel.environ(),
        )
    )
    assert lines == ["out-parent-1", "child 0", "out-parent-2"]
    assert [r["key"] for r in channel.steps()] == ["parent-1", "child", "parent-2"]
    assert channel.connections == 2


def test_a_call_the_runner_offered_is_answered_without_a_request_and_a_changed_call_is_sent(
    tmp_path: Path, channel: Channel
) -> None:
    def offer(key: str, argv: list[str], output: str) -> dict[str, Any]:
        fields = {"kind": "command", "args": command_args(argv), "after": [], "recovery": None}
        answer = {"ok": True, "key": key, "state": "success", "output": output, "value": None, "replayed": True}
        return {"fingerprint": request_fingerprint(fields), "answer": answer}

    channel.offers = {
        "call-1": offer("call-1", ["echo", "one"], "stored one"),
        "call-2": offer("call-2", ["echo", "two"], "stored two"),  # the script now sends another argv
    }
    lines = ok(
        run_script(
            tmp_path,
            """
            from rho_notebook.script import run_command

            for word in ("one", "TWO", "three"):
                h = run_command(["echo", word], timeout_seconds=5, max_output_bytes=100)
                print(h.step_id, h.output, h.replayed)
            """,
            environ=channel.environ(),
        )
    )
    assert lines == ["call-1 stored one True", "call-2 out-call-2 False", "call-3 out-call-3 False"]
    assert [r["key"] for r in channel.steps()] == ["call-2", "call-3"], "the offered call was not sent"
    assert [(n["op"], n["key"], n["token"]) for n in channel.notices] == [("replayed", "call-1", TOKEN)]
    assert channel.notices[0]["fingerprint"] == channel.offers["call-1"]["fingerprint"]


def command_args(argv: list[str]) -> dict[str, Any]:
    return {"argv": argv, "cwd": None, "timeout_seconds": 5, "max_output_bytes": 100}


def test_outside_a_run_every_call_says_how_to_run_the_script(tmp_path: Path) -> None:
    lines = ok(
        run_script(
            tmp_path,
            """
            from rho_notebook.script import emit_output, get_inputs, run_command, run_step

            calls = [
                lambda: run_step("reviewer", "p"),
                lambda: run_command(["true"], timeout_seconds=1, max_output_bytes=1),
                get_inputs,
                lambda: emit_output({"a": 1}),
            ]
            for call in calls:
                try:
                    call()
                except RuntimeError as err:
                    print(err)
            """,
            environ=None,
        )
    )
    assert len(lines) == 4
    for line in lines:
        assert "run it with `rho-notebook run SCRIPT.py`" in line
        assert "$RHO_SCRIPT_CHANNEL is not set" in line


def test_an_unreachable_runner_is_an_error_naming_the_socket(tmp_path: Path) -> None:
    gone = str(tmp_path / "gone.sock")
    lines = ok(
        run_script(
            tmp_path,
            """
            from rho_notebook.script import ChannelError, run_step

            try:
                run_step("reviewer", "p")
            except ChannelError as err:
                print(err)
            """,
            environ={"RHO_SCRIPT_CHANNEL": gone, "RHO_SCRIPT_TOKEN": TOKEN},
        )
    )
    assert lines == [
        f"cannot reach the rho-notebook runner at {gone} (No such file or directory); has the run stopped?"
    ]


# -- inputs, output, argument checks ----------------------------------------------------------------


def test_inputs_are_asked_once_and_output_is_emitted(tmp_path: Path, channel: Channel) -> None:
    lines = ok(
        run_script(
            tmp_path,
            """
            from rho_notebook.script import emit_output, get_inputs, run_step

            INPUTS = {"target": {"type": "path", "required": True}, "count": {"type": "integer", "default": 3}}

            inputs = get_inputs()
            inputs["count"] = 99
            print(get_inputs()["count"])
            review = run_step("reviewer", f"Summarise {inputs['target']}")
            emit_output({"summary": review, "count": 3})
            try:
                emit_output({1, 2})
            except TypeError as err:
                print("TypeError", str(err).startswith("emit_output(value) must be JSON data"))
            """,
            environ=channel.environ(),
        )
    )
    assert lines == ["3", "TypeError True"]
    ops = [r["op"] for r in channel.requests]
    assert ops == ["inputs", "step", "emit"]
    assert channel.requests[2] == {"token": TOKEN, "op": "emit", "value": {"summary": "out-call-1", "count": 3}}


def test_bad_arguments_are_refused_before_anything_is_sent(tmp_path: Path, channel: Channel) -> None:
    lines = ok(
        run_script(
            tmp_path,
            """
            from rho_notebook.script import run_command, run_model, run_step, schema

            limits = dict(timeout_seconds=10, max_output_bytes=1000)
            calls = {
                "argv string": lambda: run_command("ls -l", **limits),
                "argv empty": lambda: run_command([], **limits),
                "argv int": lambda: run_command(["sleep", 1], **limits),
                "timeout bool": lambda: run_command(["ls"], timeout_seconds=True, max_output_bytes=1),
                "no limits": lambda: run_command(["ls"]),
                "recovery": lambda: run_step("a", "p", recovery="always"),
                "after": lambda: run_step("a", "p", after=["call-1"]),
                "agent": lambda: run_step("", "p"),
                "prompt": lambda: run_step("a", 42),
                "output": lambda: run_step("a", "p", output={"type": "string"}),
                "messages": lambda: run_model("hi", provider="p", model="m"),
                "message item": lambda: run_model(["hi"], provider="p", model="m"),
                "json": lambda: run_model([{"role": "user", "content": object()}], provider="p", model="m"),
            }
            for name, call in calls.items():
                try:
                    call()
                except (TypeError, ValueError) as err:
                    print(name, type(err).__name__)
            print(run_step("a", "p", output=schema.list(schema.string())).step_id)
            """,
            environ=channel.environ(),
        )
    )
    assert lines == [
        "argv string TypeError",
        "argv empty TypeError",
        "argv int TypeError",
        "timeout bool TypeError",
        "no limits TypeError",
        "recovery ValueError",
        "after TypeError",
        "agent TypeError",
        "prompt TypeError",
        "output TypeError",
        "messages TypeError",
        "message item TypeError",
        "json TypeError",
        "call-1",
    ]
    assert [r["args"]["output"] for r in channel.steps()] == [
        {"__rho__": "schema", "type": "list", "inner": {"__rho__": "schema", "type": "string"}}
    ]


# -- the harness's script mode ----------------------------------------------------------------------


def test_the_script_runs_as_main_and_its_exit_code_is_the_runs(tmp_path: Path) -> None:
    (tmp_path / "modules" / "helpers").mkdir(parents=True)
    (tmp_path / "modules" / "helpers" / "__init__.py").write_text("GREETING = 'hello from a frozen module'\n")
    done = run_script(
        tmp_path,
        """
        import sys
        from helpers import GREETING

        print(__name__, GREETING, sys.argv[0].endswith("modules/scripts/flow.py"))
        sys.exit(7)
        """,
        environ=None,
    )
    assert (done.returncode, done.stdout) == (7, "__main__ hello from a frozen module True\n")
    raised = run_script(tmp_path, "raise KeyError('missing')\n", environ=None)
    assert raised.returncode == 1
    assert raised.stderr.rstrip().splitlines()[-1] == "KeyError: 'missing'"
    broken = run_script(tmp_path, "def f(:\n", environ=None)
    assert broken.returncode == 1 and "SyntaxError" in broken.stderr and "runpy" not in broken.stderr
    outside = run_script(tmp_path, "pass\n", environ=None, label="//../escape.py")
    assert outside.returncode == 3 and "is not a script label" in outside.stderr


def test_without_package_dir_rho_notebook_is_not_importable_from_the_standard_library(tmp_path: Path) -> None:
    done = run_script(tmp_path, "import rho_notebook.script\n", environ=None, package_dir=None)
    assert done.returncode == 1 and "ModuleNotFoundError: No module named 'rho_notebook'" in done.stderr


def test_importing_the_shim_loads_nothing_else_of_ours_and_no_third_party_module() -> None:
    code = (
        "import json, sys\n"
        f"sys.path[:] = {[*STDLIB_PATH, str(ROOT)]!r}\n"
        "before = set(sys.modules)\n"
        "import rho_notebook.script\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    ours = sorted(name for name in loaded if name.split(".")[0] == "rho_notebook")
    assert ours == [
        "rho_notebook",
        "rho_notebook.script",
        "rho_notebook.script._channel",
        "rho_notebook.script._errors",
        "rho_notebook.script._steps",
        "rho_notebook.script.schema",
    ]
    others = [name for name in loaded if name.split(".")[0] not in sys.stdlib_module_names | {"rho_notebook"}]
    assert others == []


# -- schemas ----------------------------------------------------------------------------------------


def test_schema_helpers_make_what_the_planner_reads() -> None:
    made = schema.record(
        {
            "summary": schema.string(),
            "count": schema.integer(),
            "done": schema.bool(),
            "severity": schema.enum(["low", "high", None]),
            "notes": schema.optional(schema.list(schema.string())),
            "nothing": schema.null(),
        }
    )
    assert json.loads(json.dumps(made)) == made
    assert to_schema(made) == RecordSchema(
        fields=(
            ("count", IntegerSchema()),
            ("done", BoolSchema()),
            ("notes", OptionalSchema(inner=ListSchema(items=StringSchema()))),
            ("nothing", NullSchema()),
            ("severity", EnumSchema(members=("low", "high", None))),
            ("summary", StringSchema()),
        )
    )


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: schema.enum([]), TypeError),
        (lambda: schema.enum(["a", "a"]), ValueError),
        (lambda: schema.enum([1.5]), TypeError),
        (lambda: schema.list({"type": "string"}), TypeError),
        (lambda: schema.optional(str), TypeError),
        (lambda: schema.record({"": schema.string()}), TypeError),
        (lambda: schema.record({"a": "string"}), TypeError),
    ],
)
def test_schema_helpers_refuse_what_is_not_a_schema(build: Callable[[], object], error: type[Exception]) -> None:
    with pytest.raises(error):
        build()
