"""The fork server Python node attempts are forked from (issue 31, item 3).

Run by :mod:`rho_notebook.exec.python_forks` in the node's frozen interpreter, launched exactly as
a cold Python attempt is (verified interpreter descriptor, ``-I``)::

    INTERPRETER -I /proc/self/fd/SRC SRC SOCK

``SRC`` is a read-only descriptor of this file (closed at once), ``SOCK`` one end of a
``SOCK_SEQPACKET`` socket pair whose other end the owner keeps. Standard library only: it runs in
the node's interpreter, whatever that environment holds (Python 3.9 or newer, for ``pidfd_open``).

Protocol: one JSON object per message, descriptors as ``SCM_RIGHTS``.

- owner -> ``{"op": "hello", "harness": PATH, "sha256": DIGEST, "paths": [...]}``: the server
  reads the harness copy, checks its digest (the plan's), loads it as a module, lists the import
  folders ``paths`` into ``sys.path_importer_cache`` (nothing is imported) and answers
  ``{"op": "ready", "pid", "python", "results"}`` (or ``{"op": "error", "message"}`` and exits 3;
  ``results``: whether its children can write their result to a memory file, below). With
  ``"site_dirs": [...], "modules_dir", "modules"`` it also adds the site directories to ``paths``
  as the harness would (``site.addsitedir``: ``.pth`` files read, their ``import`` lines run, with
  ``modules_dir``'s frozen modules importable only verified) and keeps what that did to ``sys.path``
  (:class:`_SiteMemo`): a child whose environment is the server's (but for ``RHO_NODE``) and whose
  ``sys.path`` is the same then gets that ``sys.path`` when its harness adds the same folder,
  without reading the ``.pth`` files again; any other child adds it itself. Its one descriptor
  is the owner's demand counter (below); without it the server forks only its first spare.
- server -> ``{"op": "spare", "id", "pid"}`` with a pidfd of the spare and the spare's socket:
  a child forked ahead of any request (:class:`_Server`), which leads its own session before it
  is offered (so the whole group can be signalled as soon as the owner has it). The first comes
  after ``ready``; the owner asks for each next one (after using one, or dropping one it could not
  use) by adding 1 to the counter of the eventfd it passed with ``hello`` (the *demand*). Adding
  wakes nobody: the server reads the counter whenever it wakes anyway (at a child's exit, above
  all), so a fork never competes with the start of the attempt whose launch asked for it. A
  launch that has to wait for a spare sends ``{"op": "wake"}``. ``{"op": "no_spare",
  "message"}``: the fork failed.
- owner -> spare's socket: ``{"op": "fork", "argv", "env", "modules_dir", "modules": {relpath:
  digest}}`` with descriptors (stdout, stderr, cwd, and optionally a result file). The spare takes
  the descriptors as fds 1, 2 and its working directory, replaces its environment with ``env``
  and calls the harness's ``main(argv)`` (with ``"request"``, the request's JSON text: ``argv[2]``
  names a memory file of that text instead of the file, which the owner may still be writing;
  ``sys.argv`` is ``argv``), importing frozen modules only through a finder that checks each
  source's digest (:class:`_VerifiedFinder`). With a fourth descriptor (a memory file of the
  owner's, offered only when ``ready`` said ``"results": true``) the harness writes the result
  there instead of to ``argv[3]``, which then need not exist: the owner makes the attempt's
  folder while the attempt runs instead of before it starts. A spare whose socket closes
  without a request exits at once.
- server -> ``{"op": "exit", "id", "si_code", "si_status"}`` once it reaped a spare it offered,
  used or not (only a parent can reap).
- end of file on the socket (the owner closed it, or died): the server exits; children still
  running are the owner's to stop (they lead their own groups).

The child leaves the server's loop before running the node and ends as an interpreter's exit does
(``atexit`` handlers, non-daemon threads joined, standard streams flushed) but with ``os._exit``,
skipping the teardown of the interpreter (:func:`_end`). What differs from a cold interpreter:
modules the server imported are already in ``sys.modules``, every child shares the server's
hash seed, and the site directories' ``.pth`` files were read, and their ``import`` lines run, once
in the server (their messages go to the server's log) when the run's first Python attempt started;
the top-level namespace packages holding frozen modules were looked up then too (:class:`_Namespaces`),
so a package of that name installed on the path after that is not seen by a child whose path is
the server's.
"""

from __future__ import annotations

import array
import atexit
import gc
import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import json
import os
import select
import site
import socket
import sys
import types
from collections.abc import Callable
from typing import Any, NoReturn

_MAX_MESSAGE = 1 << 20
_MAX_FDS = 8
_BUFFER = bytearray(_MAX_MESSAGE)
"""One receive buffer (a fresh 1 MiB per message would be an mmap and munmap each time)."""
_FORK_FDS = (3, 4)
"""stdout, stderr, cwd and, optionally, the owner's memory file for the result."""


def _send(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    data = json.dumps(message).encode("utf-8")
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], ancillary)


def _receive(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and its descriptors; (None, []) at end of file. A peer that closed its end with
    messages of ours unread (the owner dropping its spares at a run's end) resets the connection
    instead: the end all the same."""
    try:
        size, ancillary, flags, _ = sock.recvmsg_into([_BUFFER], socket.CMSG_SPACE(_MAX_FDS * 4))
    except ConnectionResetError:
        return None, []
    fds: list[int] = []
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            numbers = array.array("i")
            numbers.frombytes(payload[: len(payload) - len(payload) % numbers.itemsize])
            fds.extend(numbers)
    if not size:
        for fd in fds:
            os.close(fd)
        return None, []
    if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        return {"op": "truncated"}, []
    return json.loads(_BUFFER[:size]), fds


def _take_demand(fd: int) -> int:
    """The spares the owner added to its demand counter (a non-blocking eventfd) since the last read."""
    try:
        return int.from_bytes(os.read(fd, 8), sys.byteorder)
    except BlockingIOError:
        return 0


def _load_harness(path: str, sha256: str) -> types.ModuleType:
    """The harness module from the run's copy, when its bytes have the plan's digest."""
    with open(path, "rb") as handle:
        source = handle.read()
    found = "sha256:" + hashlib.sha256(source).hexdigest()
    if found != sha256:
        msg = f"the harness copy {path} has sha256 {found}, the plan froze {sha256}"
        raise ValueError(msg)
    module = types.ModuleType("_rho_harness")
    module.__file__ = path
    sys.modules["_rho_harness"] = module
    exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - the verified harness
    return module


class _VerifiedLoader(importlib.abc.SourceLoader):
    """Loads one frozen module from the bytes it read, once their digest is the plan's."""

    def __init__(self, path: str, label: str, sha256: str) -> None:
        self.path = path
        self.label = label
        self.sha256 = sha256

    def get_filename(self, fullname: str) -> str:
        return self.path

    def get_data(self, path: str) -> bytes:
        if path != self.path:
            raise OSError(f"{path} is not the frozen module {self.label}")
        with open(path, "rb") as handle:
            data = handle.read()
        found = "sha256:" + hashlib.sha256(data).hexdigest()
        if found != self.sha256:
            msg = (
                f"{self.label} (at {path}) does not match the plan (sha256 {found}, the plan froze "
                f"{self.sha256}); it was changed after the run wrote it, so it is not imported"
            )
            raise ImportError(msg)
        return data


class _VerifiedFinder(importlib.abc.MetaPathFinder):
    """First on ``sys.meta_path``: a name that is a frozen module (a ``.py`` file or a package's
    ``__init__.py`` below the modules folder) is loaded by :class:`_VerifiedLoader`; a ``.py`` file
    in that folder that the plan did not freeze is refused rather than imported unchecked."""

    def __init__(self, root: str, modules: dict[str, str], known: _Namespaces | None = None) -> None:
        self.root = root
        self.modules = modules
        self.known = known

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        known = self.known
        if known is not None and fullname in known.specs and tuple(sys.path) == known.path:
            return known.specs[fullname]
        relative = fullname.replace(".", "/")
        for candidate, package in ((relative + "/__init__.py", True), (relative + ".py", False)):
            full = os.path.join(self.root, candidate)
            digest = self.modules.get(candidate)
            if digest is None:
                if os.path.exists(full):
                    raise ImportError(f"{full} is not a module the plan froze; it is not imported", name=fullname)
                continue
            loader = _VerifiedLoader(full, "//" + candidate, digest)
            locations = [os.path.dirname(full)] if package else None
            return importlib.util.spec_from_file_location(
                fullname, full, loader=loader, submodule_search_locations=locations
            )
        return None


class _Namespaces:
    """The specs of the top-level namespace packages that hold frozen modules (``nodes`` of
    ``nodes/step.py``), found once in the server as an import in a child with ``sys.path`` ==
    ``path`` finds them: a child with that path then takes them from here. Looking one up walks
    every folder on the path (a regular package or a module of that name further on wins), 0.3-0.4
    ms of a forked child's 2 ms; the spec is built once. (A nested one's spec needs its parent
    imported, so a child looks for it itself.)"""

    def __init__(self, path: tuple[str, ...], modules_dir: str, modules: dict[str, str]) -> None:
        self.path = path
        self.frozen = (modules_dir, modules)
        """The modules folder and frozen modules they were found for."""
        self.specs: dict[str, Any] = {}
        for name in sorted({relative.split("/")[0] for relative in modules if "/" in relative}):
            if name + "/__init__.py" in modules:
                continue
            try:
                spec = importlib.util.find_spec(name)  # a top-level name: nothing is imported
            except Exception:  # noqa: BLE001 - an unfrozen file, a failing finder: a child's import meets it
                continue
            if spec is not None and spec.origin is None and spec.submodule_search_locations is not None:
                self.specs[name] = spec


_PER_NODE = "RHO_NODE"
"""The one variable in which the environments of one run's attempts differ."""


class _SiteMemo:
    """``site.addsitedir`` with what the server's own call did to ``sys.path`` remembered: installed
    in its place in the server (so in every child), it replays that in a child that may (``active``)."""

    def __init__(self) -> None:
        self.original = site.addsitedir
        self.env = {k: v for k, v in os.environ.items() if k != _PER_NODE}
        """The environment the ``.pth`` lines ran in (the server's start environment)."""
        self.results: dict[tuple[str, tuple[str, ...]], list[str]] = {}
        """(folder, ``sys.path`` before) -> ``sys.path`` after adding it."""
        self.active = False
        self.namespaces: _Namespaces | None = None

    def known(self, modules_dir: str, modules: dict[str, str]) -> _Namespaces | None:
        """The namespace packages found in the server, for a child that may use them."""
        found = self.namespaces
        return found if self.active and found is not None and (modules_dir, modules) == found.frozen else None

    def record(self, paths: list[str], site_dirs: list[str], modules_dir: str, modules: dict[str, str]) -> list[str]:
        """Add ``site_dirs`` to ``paths`` as the harness does, remember each step; returns the path."""
        saved = list(sys.path)
        finder = _VerifiedFinder(modules_dir, modules)
        sys.meta_path.insert(0, finder)
        sys.path[:] = paths
        try:
            for folder in site_dirs:
                before = tuple(sys.path)
                self.original(folder)
                self.results[(folder, before)] = list(sys.path)
            self.namespaces = _Namespaces(tuple(sys.path), modules_dir, modules)
            return list(sys.path)
        finally:
            sys.path[:] = saved
            sys.meta_path.remove(finder)

    def __call__(self, sitedir: str, known_paths: Any = None) -> Any:
        after = self.results.get((sitedir, tuple(sys.path))) if self.active and known_paths is None else None
        if after is None:
            return self.original(sitedir, known_paths)
        sys.path[:] = after
        return None


def _request_file(text: str) -> str:
    """A path that reads as ``text`` (a memory file the child keeps open until it exits)."""
    fd = os.memfd_create("request.json", os.MFD_CLOEXEC)
    data = memoryview(text.encode("utf-8"))
    while data:
        data = data[os.write(fd, data) :]
    return f"/proc/self/fd/{fd}"


def _writes_results(harness: types.ModuleType) -> bool:
    """Whether the harness writes its result through ``_write_atomically(path, text)``, which a
    child can then point at the owner's memory file (:func:`_memory_result`)."""
    return callable(getattr(harness, "_write_atomically", None))


def _memory_result(harness: types.ModuleType, fd: int, path: str) -> None:
    """Make this child's harness write ``path`` (its RESULT_JSON) to the owner's memory file ``fd``."""
    write_file = harness._write_atomically  # noqa: SLF001 - the harness's one writer, see _writes_results
    os.set_inheritable(fd, False)  # the node's own subprocesses must not get it

    def write(target: str, text: str) -> None:
        if target != path:
            write_file(target, text)
            return
        data = memoryview(text.encode("utf-8"))
        while data:
            data = data[os.write(fd, data) :]

    setattr(harness, "_write_atomically", write)  # noqa: B010 - a module attribute mypy cannot see


def _replace_environ(env: dict[str, str]) -> None:
    """Make ``os.environ`` hold exactly ``env``, setting only what differs: an attempt's environment
    is mostly the server's own, and every assignment is a ``putenv`` (clearing and refilling an
    environment of 36 variables took 0.24 ms, this 0.06 ms)."""
    for key in [key for key in os.environ if key not in env]:
        del os.environ[key]
    for key, value in env.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def _child(
    request: dict[str, Any], fds: list[int], harness: types.ModuleType, memo: _SiteMemo | None
) -> Callable[[], int]:
    """In the forked child: the attempt, to run once the server's stack is left."""
    stdout, stderr, cwd = fds[:3]
    result = fds[3:]

    def attempt() -> int:
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.fchdir(cwd)
        for fd in fds[:3]:
            os.close(fd)
        env = request["env"]
        _replace_environ(env)
        argv = list(request["argv"])
        sys.argv[:] = argv
        if memo is not None:
            memo.active = {k: v for k, v in env.items() if k != _PER_NODE} == memo.env
        if isinstance(request.get("request"), str) and len(argv) == 4:
            argv[2] = _request_file(request["request"])
        if result and len(argv) == 4:
            _memory_result(harness, result[0], argv[3])
        modules_dir, modules = request["modules_dir"], request["modules"]
        known = memo.known(modules_dir, modules) if memo is not None else None
        sys.meta_path.insert(0, _VerifiedFinder(modules_dir, modules, known))
        sys.modules["__main__"] = harness
        code: int = harness.main(argv)
        return code

    return attempt


class _Spare:
    """A child forked ahead of its request: it leads its own session and waits for one request."""

    def __init__(self, ident: int, pid: int, sock: socket.socket, ready: int) -> None:
        self.ident = ident
        self.pid = pid
        self.pidfd = os.pidfd_open(pid)
        self.sock = sock
        self.ready = ready
        """Read end of a pipe whose write end the spare closes once it leads its session."""

    def close(self) -> None:
        """Drop the spare: it exits at end of file on its socket, and is reaped here."""
        self.sock.close()
        os.close(self.ready)
        os.waitid(os.P_PIDFD, self.pidfd, os.WEXITED)
        os.close(self.pidfd)


class _Server:
    """The serving loop: spares forked and offered to the owner, exits of children through their pidfds.

    The server forks a spare child and, once the spare leads its own session, offers it to the
    owner: ``{"op": "spare", "id", "pid"}`` with a pidfd of it and the spare's socket. The owner
    sends an attempt's request straight to the spare (no round trip through the server: the
    attempt starts while the server sleeps) and asks for the next spare through its demand
    counter, read here each time the server wakes (see the module docstring); it asks as well for
    each spare it could not use. A request thus waits neither for a fork nor
    for a new process's first time slice (3-6 ms measured on a busy machine) nor for the server
    to wake (0.3-0.5 ms on a two-processor VM, and as much again for its answer). The server
    reaps every spare it forked and reports its end: ``{"op": "exit", "id", "si_code",
    "si_status"}`` (a spare that never got a request ends when the owner closes its socket)."""

    def __init__(
        self, sock: socket.socket, harness: types.ModuleType, memo: _SiteMemo | None, demand: int | None = None
    ) -> None:
        self.sock = sock
        self.demand = demand
        """The owner's demand counter (an eventfd), or None."""
        self.harness = harness
        self.memo = memo
        self.poller = select.poll()
        self.poller.register(sock.fileno(), select.POLLIN)
        self.children: dict[int, int] = {}
        """pidfd -> spare id of each child offered and not yet reaped."""
        self.forking: _Spare | None = None
        """The spare forked and not yet offered (its session not yet led)."""
        self.wanted = 1
        """Spares the owner asked for and was not offered yet (the first comes unasked)."""
        self._ids = itertools.count(1)

    def serve(self) -> Callable[[], int] | None:
        """Serve until end of file (None); in a forked child, its attempt."""
        try:
            while True:
                if self.demand is not None:
                    self.wanted += _take_demand(self.demand)
                if self.forking is None and self.wanted:
                    attempt = self._prefork()
                    if attempt is not None:
                        return attempt
                for fd, _ in self.poller.poll():
                    if fd == self.sock.fileno():
                        if not self._message():
                            self._stop()
                            return None
                    elif self.forking is not None and fd == self.forking.ready:
                        self._offer(self.forking)
                    else:
                        self._reap(fd)
        except (BrokenPipeError, ConnectionResetError):  # the owner closed its end: as at end of file
            self._stop()
            return None

    def _stop(self) -> None:
        """The owner is gone: drop the spare being forked (offered ones end at end of file)."""
        if self.forking is not None:
            self.forking.close()
            self.forking = None

    def _message(self) -> bool:
        """Take one message from the owner (``wake``: the loop reads the demand); False at end of file."""
        message, fds = _receive(self.sock)
        for fd in fds:
            os.close(fd)
        return message is not None

    def _prefork(self) -> Callable[[], int] | None:
        """Fork the next spare (None here); in the spare, its attempt once its request came."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ready, signal_ready = os.pipe()
        try:
            pid = os.fork()
        except OSError as err:
            ours.close()
            theirs.close()
            os.close(ready)
            os.close(signal_ready)
            self.wanted -= 1
            _send(self.sock, {"op": "no_spare", "message": f"fork failed ({err})"})
            return None
        if pid == 0:
            os.setsid()
            os.close(signal_ready)
            os.close(ready)
            ours.close()
            self._leave()
            request, fds = _receive(theirs)
            theirs.close()
            if request is None or len(fds) not in _FORK_FDS:
                os._exit(0)
            return _child(request, fds, self.harness, self.memo)
        theirs.close()
        os.close(signal_ready)
        self.forking = _Spare(next(self._ids), pid, ours, ready)
        self.poller.register(ready, select.POLLIN)
        return None

    def _offer(self, spare: _Spare) -> None:
        """The spare leads its session (or died): hand it to the owner, watch it for its end."""
        self.forking = None
        self.wanted -= 1
        self.poller.unregister(spare.ready)
        os.close(spare.ready)
        self.children[spare.pidfd] = spare.ident
        self.poller.register(spare.pidfd, select.POLLIN)
        try:
            _send(self.sock, {"op": "spare", "id": spare.ident, "pid": spare.pid}, (spare.pidfd, spare.sock.fileno()))
        finally:
            spare.sock.close()

    def _reap(self, pidfd: int) -> None:
        status = os.waitid(os.P_PIDFD, pidfd, os.WEXITED)
        self.poller.unregister(pidfd)
        os.close(pidfd)
        ident = self.children.pop(pidfd)
        if status is not None:
            _send(self.sock, {"op": "exit", "id": ident, "si_code": status.si_code, "si_status": status.si_status})

    def _leave(self) -> None:
        """In a child: drop the server's socket, its demand counter and the other children's pidfds."""
        for pidfd in self.children:
            os.close(pidfd)
        self.children.clear()
        self.sock.close()
        if self.demand is not None:
            os.close(self.demand)


def main(argv: list[str]) -> int:
    os.close(int(argv[1]))
    sock = socket.socket(fileno=int(argv[2]))
    hello, fds = _receive(sock)
    demand = fds.pop(0) if hello is not None and fds else None
    for fd in fds:
        os.close(fd)
    if hello is None:
        return 0
    try:
        if not hasattr(os, "pidfd_open") or not hasattr(os, "P_PIDFD"):
            raise OSError(f"Python {sys.version.split()[0]} has no os.pidfd_open (3.9 or newer is needed)")
        harness = _load_harness(hello["harness"], hello["sha256"])
    except (OSError, ValueError, SyntaxError, KeyError) as err:
        _send(sock, {"op": "error", "message": str(err)})
        return 3
    paths = [path for path in hello.get("paths", ()) if isinstance(path, str)]
    memo = _site_memo(hello, paths)
    if memo is not None:
        paths = memo.record(paths, hello["site_dirs"], hello["modules_dir"], hello["modules"])
    if paths:  # lists each folder into sys.path_importer_cache, which every fork inherits; imports nothing
        importlib.machinery.PathFinder.find_spec("_rho_forkserver_no_such_module_", paths)
    gc.freeze()  # a collection in a child then leaves the server's objects (and their pages) alone
    _send(
        sock, {"op": "ready", "pid": os.getpid(), "python": sys.version.split()[0], "results": _writes_results(harness)}
    )
    attempt = _Server(sock, harness, memo, demand).serve()
    if attempt is None:
        return 0
    _end(attempt)


def _site_memo(hello: dict[str, Any], paths: list[str]) -> _SiteMemo | None:
    """The memo of the hello's site directories, installed as ``site.addsitedir``; None without them."""
    site_dirs, modules = hello.get("site_dirs"), hello.get("modules")
    if not paths or not isinstance(site_dirs, list) or not isinstance(modules, dict):
        return None
    if not all(isinstance(folder, str) for folder in site_dirs) or not isinstance(hello.get("modules_dir"), str):
        return None
    memo = _SiteMemo()
    site.addsitedir = memo
    return memo


def _exit_code(code: object) -> int:
    """The exit status ``raise SystemExit(code)`` gives an interpreter."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _end(attempt: Callable[[], int]) -> NoReturn:
    """Run the attempt and end the child as an interpreter's exit does (non-daemon threads joined,
    ``atexit`` handlers run, standard streams flushed, status 120 when that flush fails) but
    without tearing the interpreter down: that touches every object, so it would copy every page
    the child still shares with the server (~20 ms measured)."""
    try:
        code = attempt()
    except SystemExit as stop:
        code = _exit_code(stop.code)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()  # noqa: SLF001 - what interpreter exit calls to join non-daemon threads
    atexit._run_exitfuncs()  # noqa: SLF001 - the same for atexit handlers
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - as at interpreter exit: the status says it
            code = code or 120
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
