"""The Dask executor: command, shell and Python attempts run on a ``dask.distributed`` cluster.

Only attempts travel. The run owner keeps scheduling (what is ready), the journal, cancel, resume
and recovery; Dask decides where an attempt runs. Per attempt, on the owner:

1. The frozen facts are built (:class:`~rho_notebook.exec._dask_worker.RemoteAttempt`): rendered
   argv, the executable and its ``#!`` interpreters with their plan digests (Python nodes: the
   interpreter, the node's module sources and digests, the harness, the frozen installed
   distributions, the request), the ``//`` working directory, the environment the frozen policy
   lets through, timeout and output bound, and a fresh token.
2. ``node_launched`` is already fsynced: the run driver syncs the journal before it starts an
   attempt's task (runtime/driver.py ``_launch``), and this executor submits only from that task.
3. The token goes into the attempt's claim ``Queue``; the task is submitted with ``retries=0``,
   ``pure=False``, a unique ``key`` and the node's ``resources``.
4. The result is awaited on the owner's loop. Cancel (the driver's signal) sets the attempt's
   ``Event``, which the worker watches; the worker stops the process group and answers
   ``cancelled``, which is journaled like a local cancel.
5. The answer is written into the attempt folder exactly as a local attempt writes it (``stdout``
   and ``stderr`` on their first byte, ``result.json``/``value.json``, ``exit.json`` in a folder
   that exists anyway) and judged by the local executors' own judges. The journaled exit record
   also names the ``worker``. ``process_started`` is journaled (with the worker's pid) when the
   answer arrives.
6. A lost answer (the worker died and Dask gave up, the future was cancelled or lost, a second
   execution found the token claimed, the scheduler went away) raises
   :class:`~rho_notebook.errors.AttemptUncertain`: the driver journals ``attempt_uncertain`` and
   no result, and the run ends ``needs_recovery`` (``resume --recover-uncertain``). Before that the
   owner takes the token back if it is still there (no later execution can launch) and sets the
   cancel Event (a process that still runs is stopped by its worker).

Without an address a ``LocalCluster`` (processes) is started for the run and closed with it.
``distributed`` is imported only when the executor starts (:class:`~rho_notebook.errors.DaskNotInstalled`).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
from collections.abc import Mapping
from typing import Any

from rho_notebook.errors import AttemptUncertain, DaskNotInstalled, PlanError, RhoError, UnavailableValue
from rho_notebook.exec._dask_worker import (
    RemoteAttempt,
    RemoteOutcome,
    RemotePython,
    cancel_event_name,
    claim_queue_name,
    run_attempt,
)
from rho_notebook.exec.base import AttemptContext, AttemptResult, node_environment
from rho_notebook.exec.command import CommandExecutor, render_argv
from rho_notebook.exec.process import ProcessResult
from rho_notebook.exec.python import (
    PythonExecutor,
    frozen_runtime,
    node_request,
    render_args,
    verified_harness,
)
from rho_notebook.exec.supervised import Ended, FileSink, Judge, ProcessOperation, conclude
from rho_notebook.model.graph import CommandNode, PythonNode, ShellNode, resources_of
from rho_notebook.model.state import NodeState
from rho_notebook.store.files import atomic_write, atomic_write_json
from rho_notebook.store.ids import new_id
from rho_notebook.store.layout import REQUEST_FILE, RESULT_FILE

__all__ = ["DaskExecutor"]

_REVOKE_SECONDS = 0.5
"""How long the owner waits for the scheduler's answer when it takes an unclaimed token back (an
attempt given up); the take itself never waits for a token."""


def _distributed() -> Any:
    """The ``distributed`` module (typed Any: it ships no annotations), imported at first use."""
    try:
        return importlib.import_module("distributed")
    except ImportError as err:
        raise DaskNotInstalled(reason=str(err)) from err


class _Lost(Exception):
    """The attempt's answer will not come (see the module docstring, step 6)."""


class DaskExecutor:
    """Runs command, shell and Python attempts on a Dask cluster; see the module docstring.

    Parameters
    ----------
    address
        The scheduler (``tcp://host:8786``); None starts a ``LocalCluster`` (processes) for the run.
    path_map
        Owner path prefix -> worker path prefix, applied on the worker to the workspace, the
        executables and interpreters, and a Python node's ``sys.path``.
    n_workers, threads_per_worker
        Shape of the ``LocalCluster`` started when there is no address (Dask's defaults when None).
    kill_grace_seconds
        Between ``SIGTERM`` and ``SIGKILL`` of a timed-out or cancelled process group.
    """

    def __init__(
        self,
        address: str | None = None,
        path_map: Mapping[str, str] | None = None,
        *,
        n_workers: int | None = None,
        threads_per_worker: int | None = None,
        kill_grace_seconds: float = 2.0,
    ) -> None:
        self.address = address
        self.path_map: tuple[tuple[str, str], ...] = tuple(sorted((path_map or {}).items()))
        self.n_workers = n_workers
        self.threads_per_worker = threads_per_worker
        self.kill_grace_seconds = kill_grace_seconds
        self._judges: dict[str, Judge] = {
            "command": CommandExecutor().judge,
            "shell": CommandExecutor().judge,
            "python": PythonExecutor().judge,
        }
        self._started: asyncio.Future[Any] | None = None
        self._cluster: Any = None

    # -- the connection --------------------------------------------------------------------------------

    async def client(self) -> Any:
        """The asynchronous ``distributed.Client`` of this executor (connected on first use)."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._connect())
        return await asyncio.shield(self._started)

    async def _connect(self) -> Any:
        dist = _distributed()
        address: Any = self.address
        if address is None:
            self._cluster = await dist.LocalCluster(
                processes=True,
                n_workers=self.n_workers,
                threads_per_worker=self.threads_per_worker,
                dashboard_address=":0",
                asynchronous=True,
            )
            address = self._cluster
        return await dist.Client(address, asynchronous=True)

    async def aclose(self) -> None:
        """Close the client (and the ``LocalCluster`` started for the run)."""
        started, self._started = self._started, None
        if started is None:
            return
        try:
            client = await started
        except Exception:
            client = None
        if client is not None:
            await client.close()
        if self._cluster is not None:
            cluster, self._cluster = self._cluster, None
            await cluster.close()

    # -- one attempt -----------------------------------------------------------------------------------

    def _remote(self, ctx: AttemptContext, token: str) -> tuple[RemoteAttempt, dict[str, Any] | None]:
        """The attempt's frozen facts and, for a Python node, its request.json."""
        node = ctx.node
        env = node_environment(ctx.environment, ctx.source_environ, run_id=ctx.run_id, node=node.name)
        common: dict[str, Any] = {
            "attempt_id": f"{ctx.run_id}.{node.name}.{ctx.attempt}",
            "token": token,
            "workspace": str(ctx.workspace),
            "env": env,
            "timeout_seconds": float(node.timeout_seconds),
            "max_output_bytes": node.max_output_bytes,
            "kill_grace_seconds": self.kill_grace_seconds,
            "path_map": self.path_map,
        }
        if isinstance(node, (CommandNode, ShellNode)):
            argv = render_argv(node, ctx.outputs)
            return RemoteAttempt(executable=node.executable, argv=argv, cwd=node.cwd, **common), None
        if not isinstance(node, PythonNode) or ctx.graph is None:
            msg = f"DaskExecutor cannot run a {node.kind} node"
            raise TypeError(msg)
        graph = ctx.graph
        request = node_request(node, graph, render_args(node, ctx.outputs))
        runtime = frozen_runtime(graph)
        python = RemotePython(
            modules=tuple(graph.python_module(label) for label in node.modules),
            harness_text=verified_harness(runtime).decode("utf-8"),
            harness_sha256=runtime.harness_sha256,
            request=request,
            distributions=runtime.distributions,
        )
        remote = RemoteAttempt(executable=runtime.interpreter, argv=(), cwd=node.cwd, python=python, **common)
        return remote, request

    async def execute(self, ctx: AttemptContext) -> AttemptResult:
        node = ctx.node
        if not isinstance(node, (CommandNode, ShellNode, PythonNode)):
            msg = f"DaskExecutor cannot run a {node.kind} node"
            raise TypeError(msg)
        token = new_id()
        try:
            remote, request = self._remote(ctx, token)
            if request is not None:
                folder = await ctx.directory()
                await asyncio.to_thread(atomic_write_json, folder / REQUEST_FILE, request, durable=False)
        except UnavailableValue as err:
            part = "args" if isinstance(node, PythonNode) else "argv"
            return AttemptResult(state=NodeState.FAILURE, message=f"cannot render {part}: {err}")
        except (PlanError, KeyError, OSError) as err:
            message = err.message if isinstance(err, RhoError) else str(err)
            record = {"kind": "not_started", "code": None, "signal": None, "detail": message}
            return AttemptResult(state=NodeState.FAILURE, message=message, exit=record)
        try:
            client = await self.client()
        except (OSError, TimeoutError) as err:  # nothing was submitted: certainly nothing launched
            where = self.address or "a LocalCluster started for the run"
            message = f"cannot reach the Dask scheduler at {where} ({type(err).__name__}: {err}); nothing was launched"
            record = {"kind": "not_started", "code": None, "signal": None, "detail": message}
            return AttemptResult(state=NodeState.FAILURE, message=message, exit=record)
        outcome = await self._run(ctx, client, remote, token)
        result = await self._conclude(ctx, remote, outcome)
        if request is not None:
            result.artifacts["request"] = REQUEST_FILE
        return result

    async def _run(self, ctx: AttemptContext, client: Any, remote: RemoteAttempt, token: str) -> RemoteOutcome:
        """Claim token in, task submitted, answer awaited (cancel forwarded); raises AttemptUncertain."""
        dist = _distributed()
        queue = await dist.Queue(claim_queue_name(remote.attempt_id), client=client)
        await queue.put(token)
        event = dist.Event(cancel_event_name(remote.attempt_id), client=client)
        future = client.submit(
            run_attempt,
            remote,
            key=f"rho-attempt-{remote.attempt_id}-{token}",
            pure=False,
            retries=0,
            resources=resources_of(ctx.node) or None,
        )
        answer = asyncio.ensure_future(_answer(future))
        cancelled = asyncio.ensure_future(ctx.cancel.wait())
        forwarded = False
        try:
            await asyncio.wait({answer, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            if not answer.done():
                await event.set()  # the worker stops the process group and answers "cancelled"
                forwarded = True
            outcome = await answer
        except _Lost as err:
            taken = await _give_up(queue, event)
            _release(queue)
            raise AttemptUncertain(f"{err}; {taken}; the attempt may have run: its result is unknown") from err
        except asyncio.CancelledError:
            # the owner is being torn down: ask the worker to stop the process (as a local attempt's
            # group is killed), then let the attempt become uncertain when the run is next opened
            with contextlib.suppress(Exception):
                await asyncio.wait_for(event.set(), _REVOKE_SECONDS)
            raise
        finally:
            cancelled.cancel()
            if not answer.done():
                answer.cancel()
            future.release()
        if not outcome.claimed:
            await _give_up(queue, event)  # the claim is taken: this only sets the cancel event
            _release(queue)
            msg = (
                f"the attempt's task ran again on {outcome.worker} and found its claim taken: the execution "
                "that launched it was lost (its worker died), so the attempt may have run and its result is unknown"
            )
            raise AttemptUncertain(msg)
        _release(queue)
        if forwarded:
            await event.clear()
        return outcome

    async def _conclude(self, ctx: AttemptContext, remote: RemoteAttempt, outcome: RemoteOutcome) -> AttemptResult:
        """Write the worker's answer into the attempt folder as a local attempt does, and judge it."""
        if outcome.process is None:
            reason = "worker_verification" if outcome.verification else "worker_launch"
            detail = f"on worker {outcome.worker}: {outcome.failure}; nothing was launched"
            record = {
                "kind": "not_started",
                "code": None,
                "signal": None,
                "detail": detail,
                "reason": reason,
                "verification": outcome.verification,
                "worker": outcome.worker,
            }
            what = "verification failed" if outcome.verification else "launch failed"
            return AttemptResult(state=NodeState.FAILURE, message=f"worker {what} {detail}", exit=record)
        process = ProcessResult.model_validate(outcome.process)
        if process.pid is not None:
            await ctx.on_started(process.pid)
        stdout, stderr = FileSink("stdout", ctx), FileSink("stderr", ctx)
        try:
            for sink, data in ((stdout, outcome.stdout), (stderr, outcome.stderr)):
                if data:
                    await sink(data)
        finally:
            stdout.close()
            stderr.close()
        node = ctx.node
        operation = ProcessOperation(
            name=node.name,
            executable=remote.executable,
            argv=remote.argv,
            cwd=remote.cwd,
            timeout_seconds=node.timeout_seconds,
            max_output_bytes=node.max_output_bytes,
            output=node.output,
        )
        if isinstance(node, PythonNode) and process.kind == "exit" and process.exit_code == 0:
            if isinstance(outcome.result, int):
                message = (
                    f"the return value of {node.function}() is {outcome.result} bytes as JSON, "
                    f"more than max_output_bytes={node.max_output_bytes}"
                )
                return await conclude(ctx, operation, process, stdout=stdout, stderr=stderr, judge=_fails(message))
            if outcome.result is not None:
                folder = await ctx.directory()
                await asyncio.to_thread(atomic_write, folder / RESULT_FILE, outcome.result, durable=False)
        result = await conclude(ctx, operation, process, stdout=stdout, stderr=stderr, judge=self._judges[node.kind])
        if result.exit is not None:
            result.exit["worker"] = outcome.worker
        return result


def _fails(message: str) -> Judge:
    async def judge(ended: Ended) -> AttemptResult:
        return ended.failure(message)

    return judge


async def _answer(future: Any) -> RemoteOutcome:
    """The task's answer; :class:`_Lost` for every way it can fail to come."""
    try:
        outcome = await future
    except asyncio.CancelledError:
        raise
    except Exception as err:  # KilledWorker, FutureCancelledError, CommClosedError, a worker-side bug
        raise _Lost(f"the attempt's task was lost ({type(err).__name__}: {err})") from err
    if not isinstance(outcome, RemoteOutcome):
        msg = f"the attempt's task answered {type(outcome).__name__}, not a RemoteOutcome"
        raise _Lost(msg)
    return outcome


def _release(queue: Any) -> None:
    """Drop the owner's hold on the claim queue (the scheduler deletes it when nobody holds it).
    Twice: awaiting a ``Queue`` of an asynchronous client registers it twice (distributed
    2026.8), and the scheduler ignores the release of a queue it no longer has."""
    queue.close()
    queue.close()


async def _give_up(queue: Any, event: Any) -> str:
    """Take the token back if nobody claimed it (no later execution may launch), set the cancel
    Event (a process that still runs on a worker is stopped) and say which it was. Both are
    best effort: the scheduler itself may be gone, which the answer then says."""
    try:
        # everything the queue holds, at once: a get that waits and times out is an error the
        # scheduler logs with its traceback (on the owner's stderr when the cluster is the run's own)
        found = await asyncio.wait_for(queue.get(batch=True), _REVOKE_SECONDS)
    except Exception as err:
        taken = f"its token could not be taken back ({type(err).__name__}: {err})"
    else:
        taken = (
            "its token was still unclaimed and is taken back, so no later execution can launch it"
            if found
            else "its token had been claimed by a worker"
        )
    try:
        await event.set()
    except Exception as err:
        return f"{taken}; the cancel event could not be set ({type(err).__name__}: {err})"
    return taken
