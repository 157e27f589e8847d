"""Per-launch cost of the process layer against subprocess.run and asyncio subprocesses.

Run: ``PYTHONPATH=. python bench/process_launch.py [--launches N] [--rounds R]``

Every method launches the same program (``/usr/bin/true``, then a ``#!/bin/sh`` script whose
body is ``exit 0``) ``N`` times per round; rounds interleave the methods so that machine drift
hits all of them alike. Reported: median and 90th percentile of single launch times (ms) over all
rounds, end to end (for ``run_process``: verification, launch, pipe reading, reap, result).

Methods:

* ``subprocess.run``          -- plain ``subprocess.run([prog])``, the reference
* ``subprocess.run capture``  -- same with stdin=DEVNULL and captured stdout/stderr
* ``asyncio default``         -- ``asyncio.create_subprocess_exec`` + ``communicate()``
  (3.11 default ThreadedChildWatcher: one thread per child)
* ``asyncio pidfd watcher``   -- the same with ``asyncio.PidfdChildWatcher`` installed
* ``popen+pidfd (no verify)`` -- the launch core of ``run_process`` alone: Popen with own
  pipes, ``loop.add_reader`` on pipes and pidfd, ``waitid(P_PIDFD)``
* ``run_process``             -- the full runner, digest cache warm
* ``run_process, no cache``   -- the full runner, digest cache cleared before every launch

Figures measured on the development VM (2 vCPU AMD EPYC, Linux 6.18, CPython 3.11.7),
``--launches 200 --rounds 5``, two consecutive runs; median / p90 in ms (run-to-run noise on this
VM is about 0.2 ms):

==========================  ===========================  ===========================
method                      /usr/bin/true                #!/bin/sh script
==========================  ===========================  ===========================
subprocess.run              0.879 / 1.040, 0.895 / 1.234  0.987 / 1.153, 0.971 / 1.155
subprocess.run capture      0.977 / 1.120, 1.004 / 1.217  1.064 / 1.263, 1.036 / 1.255
asyncio default             1.251 / 1.635, 1.457 / 2.420  1.353 / 1.754, 1.321 / 1.713
asyncio pidfd watcher       1.068 / 1.289, 1.313 / 2.151  1.328 / 1.664, 1.231 / 1.559
popen+pidfd (no verify)     1.005 / 1.154, 1.099 / 1.529  1.115 / 1.351, 1.109 / 1.277
run_process                 1.280 / 1.551, 1.467 / 2.002  1.541 / 1.924, 1.434 / 1.915
run_process, no cache       1.316 / 1.726, 1.558 / 2.078  1.683 / 2.220, 1.482 / 1.769
==========================  ===========================  ===========================

Stage timings inside ``run_process`` for ``/usr/bin/true`` (median of 1000): verification of
the binary and working directory ~0.10 ms, ``Popen`` (vfork until exec) ~0.24 ms, the child
running until its pidfd is readable ~0.64 ms, reap + group check + result ~0.07 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import statistics
import subprocess
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path

from rho_notebook.exec import verify
from rho_notebook.exec.process import ProcessSpec, run_process
from rho_notebook.model.graph import FrozenExecutable, FrozenFile

__all__ = ["main"]

Launch = Callable[[], Awaitable[None]]


def _frozen(path: str) -> FrozenFile:
    real = os.path.realpath(path)
    with open(real, "rb") as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()
    return FrozenFile(path=real, in_workspace=False, sha256=f"sha256:{digest}")


def _spec(workspace: Path, argv: tuple[str, ...], executable: FrozenExecutable) -> ProcessSpec:
    return ProcessSpec(
        argv=argv,
        executable=executable,
        cwd=workspace,
        env={},
        timeout_seconds=30,
        max_output_bytes=4096,
        workspace=workspace,
    )


async def _discard(_chunk: bytes) -> None:
    return None


async def _popen_pidfd(argv: list[str]) -> None:
    loop = asyncio.get_running_loop()
    out_r, out_w = os.pipe2(os.O_CLOEXEC)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w, start_new_session=True, env={}
        )
    finally:
        os.close(out_w)
        os.close(err_w)
    pidfd = os.pidfd_open(proc.pid)
    remaining = {out_r, err_r}
    done = loop.create_future()

    def on_pipe(fd: int) -> None:
        if not os.read(fd, 65536):
            loop.remove_reader(fd)
            os.close(fd)
            remaining.discard(fd)

    def on_exit() -> None:
        loop.remove_reader(pidfd)
        done.set_result(None)

    for fd in (out_r, err_r):
        os.set_blocking(fd, False)
        loop.add_reader(fd, on_pipe, fd)
    loop.add_reader(pidfd, on_exit)
    await done
    status = os.waitid(os.P_PIDFD, pidfd, os.WEXITED | os.WNOHANG)
    proc.returncode = 0 if status is None else status.si_status
    os.close(pidfd)
    while remaining:
        await asyncio.sleep(0)


def _methods(program: str, spec: ProcessSpec) -> dict[str, Launch]:
    async def sub_run() -> None:
        subprocess.run([program], check=True)

    async def sub_run_capture() -> None:
        subprocess.run([program], check=True, stdin=subprocess.DEVNULL, capture_output=True)

    async def asyncio_exec() -> None:
        proc = await asyncio.create_subprocess_exec(
            program, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        await proc.communicate()

    async def popen_pidfd() -> None:
        await _popen_pidfd([program])

    async def runner() -> None:
        await run_process(spec, stdout_sink=_discard, stderr_sink=_discard, cancel=asyncio.Event())

    async def runner_cold() -> None:
        verify._DIGESTS.clear()
        await runner()

    return {
        "subprocess.run": sub_run,
        "subprocess.run capture": sub_run_capture,
        "asyncio default": asyncio_exec,
        "asyncio pidfd watcher": asyncio_exec,
        "popen+pidfd (no verify)": popen_pidfd,
        "run_process": runner,
        "run_process, no cache": runner_cold,
    }


def _set_watcher(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if name == "asyncio pidfd watcher":
            asyncio.set_child_watcher(asyncio.PidfdChildWatcher())
        else:
            asyncio.set_child_watcher(asyncio.ThreadedChildWatcher())


async def _time(launch: Launch, count: int) -> list[float]:
    times: list[float] = []
    for _ in range(count):
        began = time.perf_counter()
        await launch()
        times.append((time.perf_counter() - began) * 1000)
    return times


def _measure(label: str, program: str, spec: ProcessSpec, *, launches: int, rounds: int) -> None:
    methods = _methods(program, spec)
    samples: dict[str, list[float]] = {name: [] for name in methods}
    for _ in range(rounds):
        for name, launch in methods.items():
            _set_watcher(name)
            samples[name] += asyncio.run(_time(launch, launches))
    _set_watcher("")
    print(f"\n{label}: {launches} launches x {rounds} rounds, per launch in ms")
    reference = statistics.median(samples["subprocess.run"])
    for name, values in samples.items():
        median = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        print(f"  {name:26s} median {median:6.3f}  p90 {p90:6.3f}  ({median / reference:4.2f}x subprocess.run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--launches", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp).resolve()
        script = workspace / "noop.sh"
        script.write_text("#!/bin/sh\nexit 0\n")
        script.chmod(0o755)
        old = time.time() - 3600
        os.utime(script, (old, old))
        time.sleep(verify.SETTLED_SECONDS)  # let the script's ctime settle so its digest is cacheable
        true_spec = _spec(workspace, ("true",), FrozenExecutable(file=_frozen("/usr/bin/true")))
        script_file = FrozenFile(path="//noop.sh", in_workspace=True, sha256=_frozen(str(script)).sha256)
        script_exe = FrozenExecutable(file=script_file, interpreters=(_frozen("/bin/sh"),))
        script_spec = _spec(workspace, ("noop.sh",), script_exe)
        _measure("/usr/bin/true", "/usr/bin/true", true_spec, launches=args.launches, rounds=args.rounds)
        _measure("#!/bin/sh script", str(script), script_spec, launches=args.launches, rounds=args.rounds)


if __name__ == "__main__":
    main()
