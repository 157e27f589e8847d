"""Following a run's owner from the terminal: ``run`` and ``resume`` after the start, and ``wait RUN``.

A run's owner is a process of its own (:meth:`rho_notebook.service.Service.start_owner`): the CLI
starts it (by forking itself, so a run starts as fast as it did in-process), then *follows* it
(:meth:`~rho_notebook.service.Service.follower`) and prints what the owner journals. Nothing the
CLI does afterwards decides what happens to the run:

- Ctrl-C, SIGTERM and SIGHUP stop following only (at an approval prompt too, undecided): the CLI
  says which run goes on and how to follow, wait for or cancel it, and exits 128 + the signal's
  number (130, 143, 129). The signals are remembered by handlers installed for the length of the
  start and the following (:class:`Detach`), never raised, so nothing half-done is torn down.
- A reader of standard output that went away (``run ... | head -1``) stops following quietly
  (:func:`rho_notebook.cli.main.main` exits 141).
- Only ``cancel`` cancels.

While it follows on a terminal (standard input a TTY, not ``--wait``), the CLI holds the run's
follow lock (``answers=True``): the owner then waits for a person as long as a node allows, and
each request a node waits on is asked at the terminal (:func:`terminal_responder`). It says so
from before the owner starts (:class:`~rho_notebook.service.starting.Presence`), since the owner
may ask before the follower has attached. With nobody following that can answer,
``--approval-timeout`` applies, as it did before owners had processes of their own.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from rho_notebook.cli._terminal import Printer, allowed_failures, print_summary, terminal_responder
from rho_notebook.errors import RhoError
from rho_notebook.model.budget import is_budget_halt, resume_flags
from rho_notebook.model.graph import Graph
from rho_notebook.model.run_state import RunState
from rho_notebook.model.state import Lifecycle
from rho_notebook.service import OwnerOptions, Service
from rho_notebook.service.starting import Presence
from rho_notebook.service.sync import release_threads, run_sync
from rho_notebook.service.wire import status_json

__all__ = ["Detach", "start_and_follow", "run_wait", "exit_for", "EXIT_TIMEOUT"]

EXIT_TIMEOUT = 3
"""``wait --timeout``: the run was still going when the time was up."""

_DETACH_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Detach:
    """Ctrl-C, SIGTERM and SIGHUP while the CLI starts or follows a run: remembered (the first
    one), never raised, and the follower stops at its next poll (``stop=detach``). Use it as a
    context manager; the previous handlers come back on exit."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> Detach:
        for number in _DETACH_SIGNALS:
            self._saved[number] = signal.signal(number, self._caught)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._saved.items():
            signal.signal(number, handler)
        self._saved.clear()

    def _caught(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum

    def __call__(self) -> bool:
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process the signal ended."""
        return 128 + (self.signum or 0)


class _Asker:
    """Asks at the terminal about each request the run waits on (a node's approval or form),
    once per request, as the follower's mirror shows them: new ones and those already waiting
    when following started (a resumed run). Each is read and asked in a daemon thread, so the
    follower goes on polling and a decision made elsewhere wins."""

    def __init__(self, service: Service, run_id: str) -> None:
        self.service = service
        self.run_id = run_id
        self.respond = terminal_responder(service)
        self.seen: set[str] = set()

    def tick(self, state: RunState) -> None:
        for request_id in state.waiting_requests().values():
            if request_id not in self.seen:
                self.seen.add(request_id)
                threading.Thread(target=self._ask, args=(request_id,), daemon=True, name="ask-request").start()

    def _ask(self, request_id: str) -> None:
        try:  # this thread's own loop (run_sync): the main one is busy following
            request = run_sync(self.service.approval_request(self.run_id, request_id))
        except RhoError as err:
            print(f"rho-notebook: cannot read request {request_id}: {err.message}", file=sys.stderr, flush=True)
            return
        self.respond(request)


def start_and_follow(
    service: Service, args: argparse.Namespace, run_id: str, *, graph: Graph, options: OwnerOptions
) -> int:
    """Start the owner of created (or, ``options.resume``, resumable) run ``run_id`` and follow it
    to its end (``--detach``: say it started and return at once); the exit code.

    Raises
    ------
    RhoError
        The owner refused the run (owned elsewhere, needs recovery, already completed, ...).
    """
    before = run_sync(service.status(run_id))
    rejoined = _rejoined(service, before) if options.resume else []
    answers = sys.stdin.isatty() and not args.wait and not args.detach
    if not answers and not options.approval_timeout:
        _warn_unanswered(service, args, run_id)
    presence = Presence(service.layout, run_id) if answers else None
    with Detach() as detach, presence or contextlib.nullcontext():
        release_threads()  # no thread but this one: the owner is forked from this process
        pid = service.start_owner(run_id, options, fork=True)  # the forked owner rebinds sys.stdout/stderr to its log
        if args.detach:
            return _started(service, run_id, pid=pid, output=args.output)
        follow = _Following(after_seq=before.last_seq, rejoined=rejoined, detach=detach, presence=presence)
        return _follow(service, args, run_id, graph=graph, following=follow)


def _warn_unanswered(service: Service, args: argparse.Namespace, run_id: str) -> None:
    """Say, before the owner starts, that a supervised run's launches will be denied at once:
    nobody here can answer (``--detach``, ``--wait``, no terminal) and ``--approval-timeout`` is 0.
    (An approval node waits its own ``timeout_seconds`` whoever follows.)"""
    if run_sync(service.manifest(run_id)).mode != "supervised":
        return
    why = "--detach" if args.detach else "--wait" if args.wait else "standard input is not a terminal"
    print(
        f"rho-notebook: warning: nobody here can answer this supervised run's launches ({why}) and "
        "--approval-timeout is 0, so each is denied at once; give --approval-timeout SECONDS and decide "
        f"with `rho-notebook approve {run_id}`",
        file=sys.stderr,
    )


def _started(service: Service, run_id: str, *, pid: int, output: str) -> int:
    """``--detach``: the run's ID and its owner, once the owner holds it."""
    state = run_sync(service.status(run_id))
    if output == "text":
        print(f"run {run_id} started (owner pid {pid})")
    else:
        print(json.dumps({"run_id": run_id, "state": state.lifecycle.value, "owner_pid": pid}))
    return 0


def _rejoined(service: Service, before: RunState) -> list[dict[str, Any]]:
    """The requests a resumed run's attempts were waiting on when its last owner stopped, as the
    ``approval_requested`` records (``rejoined``, no ``seq``: journaled once already) its new
    owner asks them again with; read before the start (a fork needs this process single-threaded)."""
    records = []
    for request_id in before.waiting_requests().values():
        request = run_sync(service.approval_request(before.run_id, request_id))
        records.append(
            {"run_id": request.run_id, "kind": "approval_requested", **request.record_fields(), "rejoined": True}
        )
    return records


@dataclass(frozen=True)
class _Following:
    """How :func:`_follow` follows a run it just started."""

    after_seq: int
    """The run's last record before the start: the owner's records come after it."""
    rejoined: list[dict[str, Any]]
    """What a resumed run waits on again (:func:`_rejoined`), shown first."""
    detach: Detach
    presence: Presence | None
    """Held while a person here can answer (a terminal); released once the follower holds its share."""


def _follow(service: Service, args: argparse.Namespace, run_id: str, *, graph: Graph, following: _Following) -> int:
    """Print the run's records as its owner journals them (none with ``--wait`` or ``--output
    json``), answer its requests when a person is here, then the end lines; or detach on a signal."""
    progress = not args.wait and args.output != "json"
    presence, detach = following.presence, following.detach
    answers = presence is not None
    follower = service.follower(run_id, after_seq=following.after_seq, answers=answers)
    live = progress and args.output == "text" and sys.stdout.isatty()
    printer = Printer(args.output, allowed=allowed_failures(graph), folder=follower.folder, live=live)
    asker = _Asker(service, run_id) if answers else None

    def on_tick(state: RunState) -> None:
        if presence is not None:  # the follower holds its own share now
            presence.release()
        if progress:
            printer.tick(state)
        if asker is not None:
            asker.tick(state)

    on_event: Callable[[dict[str, Any]], None] = printer if progress else _ignore
    try:
        for record in following.rejoined:
            on_event(record)
        state = run_sync(follower.follow(on_event, on_tick=on_tick, stop=detach))
    finally:
        printer.close()
    if detach.signum is not None:
        return _detached(run_id, detach)
    return _ended(service, state, graph=graph, output=args.output)


def _ignore(record: dict[str, Any]) -> None:
    """``--wait``: no progress lines."""


def _detached(run_id: str, detach: Detach, *, what: str = "following") -> int:
    """Stopped following on a signal: the run goes on; say how to get back to it."""
    print(
        f"\nrho-notebook: stopped {what} run {run_id}; the run goes on (only `cancel` stops it)\n"
        f"  follow it:   rho-notebook events {run_id} --follow\n"
        f"  wait for it: rho-notebook wait {run_id}\n"
        f"  cancel it:   rho-notebook cancel {run_id}",
        file=sys.stderr,
        flush=True,
    )
    return detach.exit_code


def _ended(service: Service, state: RunState, *, graph: Graph, output: str) -> int:
    """The end of a followed run: its outcome (text: and each node's line), what to do when it
    needs a person; exit 0 on success, else 1."""
    run_id = state.run_id
    if state.lifecycle is Lifecycle.NEEDS_RECOVERY:
        print(
            f"rho-notebook: the owner of run {run_id} stopped before the run ended (see owner.log in its folder); "
            f"inspect it with `rho-notebook status {run_id[:13]}`, then resume it with "
            f"`rho-notebook resume {run_id[:13]} --yes` (add --recover-uncertain if status says attempts are uncertain)",
            file=sys.stderr,
        )
    if output == "json":
        print(json.dumps(status_json(state, layout=service.layout)))
    elif output == "text":
        if state.lifecycle is Lifecycle.NEEDS_DECISION:
            budgets = "".join(f"\n  {h['step']}: {h['why']}" for h in state.halted if is_budget_halt(h["why"]))
            print(
                f"run {run_id}  needs a decision: rho-notebook resume {run_id[:13]} {resume_flags(state.halted)}"
                + budgets
            )
        elif state.outcome is None:
            print(f"run {run_id}  {state.lifecycle.value}")
        else:
            print(f"run {run_id}  outcome {state.outcome}")
        print_summary(service, run_id, graph)
    return exit_for(state)


def exit_for(state: RunState) -> int:
    """``run``, ``resume`` and ``wait`` exit 0 on success only, else 1 (stalled, blocked, ...)."""
    return 0 if state.outcome == "success" else 1


def run_wait(args: argparse.Namespace) -> int:
    """``wait RUN [--timeout S]``: follow quietly until the run's owner stops; exit by outcome,
    3 when the time is up (the run's lifecycle is printed), 128 + N on signal N (the run goes on)."""
    service = Service.default()
    run_id = run_sync(service.resolve_run(args.run))
    graph = run_sync(service.run_graph(run_id))
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    timed_out = False
    with Detach() as detach:

        def stop() -> bool:
            nonlocal timed_out
            timed_out = deadline is not None and time.monotonic() >= deadline
            return detach() or timed_out

        state = run_sync(service.follower(run_id).follow(_ignore, stop=stop))
    if detach.signum is not None:
        return _detached(run_id, detach, what="waiting for")
    if timed_out:
        return _still_going(service, run_sync(service.status(run_id)), timeout=args.timeout, output=args.output)
    return _ended(service, state, graph=graph, output=args.output)


def _still_going(service: Service, state: RunState, *, timeout: float, output: str) -> int:
    """``wait --timeout``: the time is up and the run goes on; its lifecycle, exit 3."""
    if output == "json":
        print(json.dumps(status_json(state, layout=service.layout)))
    else:
        print(
            f"run {state.run_id}  {state.lifecycle.value} after {timeout:g} s; it goes on "
            f"(rho-notebook wait {state.run_id[:13]} again, or rho-notebook events {state.run_id[:13]} --follow)"
        )
    return EXIT_TIMEOUT
