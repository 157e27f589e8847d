"""``record RUN DIR``: a finished run -> a regression test, and replaying that test.

Layout of DIR:

==========================  ========================================================================
``recording.json``          the run's steps and their recorded answers (format in
                            :mod:`rho_notebook.runtime.recording`)
``sources/<label path>``    a copy of the plan's sources: the script and the modules it imports
                            (script runs) or the ``.star`` modules (graph runs)
``test_<workflow>.py``      a pytest file that calls :func:`replay_recording` on DIR
``conftest.py``             keeps pytest from collecting ``sources/`` (not written over one of yours)
==========================  ========================================================================

A replay plans the entry again from the *current* workspace sources with the recorded inputs (a
run planned from a notebook's cell: that cell of the notebook as it is now),
creates a run of it (reuse off) in the default store, executes it with the recorded answers
(:func:`rho_notebook.runtime.recording.recording_executors`, or the recording-backed step runner
for scripts) and compares keys, states and values with the recording. A step whose inputs changed
(prompt, argv, agent, schema, cwd) fails the test, named with both digests.
"""

from __future__ import annotations

import asyncio
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from rho_notebook.errors import RecordingError, RhoError, StoreError
from rho_notebook.model.condition import UNAVAILABLE
from rho_notebook.model.graph import Graph
from rho_notebook.model.plan import Plan
from rho_notebook.model.run_state import RunState
from rho_notebook.model.source import SourceText
from rho_notebook.model.state import Lifecycle, not_completed
from rho_notebook.policy.trust import TrustStore
from rho_notebook.runtime.owner import default_executors, execute_run
from rho_notebook.runtime.recording import (
    Mismatches,
    RecordedStep,
    Recording,
    RecordingStepRunner,
    compare,
    load_recording,
    node_digest,
    recording_executors,
)
from rho_notebook.runtime.script_steps import StepRunner
from rho_notebook.runtime.status import load_state
from rho_notebook.service.background import default_runner
from rho_notebook.service.export import read_cells
from rho_notebook.service.kernel_python import notebook_interpreter
from rho_notebook.service.paths import make_folder
from rho_notebook.service.requests import Consent, StartRun
from rho_notebook.source.workspace import Workspace
from rho_notebook.store.files import atomic_write
from rho_notebook.store.layout import VALUE_FILE, StoreLayout
from rho_notebook.store.plans import PlanStore
from rho_notebook.store.runs import RunFolder, RunStore

__all__ = ["Recorded", "Replayed", "record_run", "replay_recording", "replay_recording_async"]

_TEXT_LIMIT = 1_048_576
"""Bytes of a command step's stdout/stderr kept in the recording (the rest is cut, marked)."""


@dataclass(frozen=True)
class Recorded:
    """What ``record`` wrote."""

    run_id: str
    folder: Path
    recording: Path
    test: Path
    sources: tuple[Path, ...]
    steps: int
    live_commands: bool


@dataclass(frozen=True)
class Replayed:
    """A replay that matched its recording."""

    run_id: str
    plan_id: str
    steps: tuple[str, ...]


# -- recording -----------------------------------------------------------------------------------------


def _read_json(folder: RunFolder, path: Path) -> Any:
    """An attempt's JSON file (``value.json``), None when it has none; read as the store reads
    (no link followed anywhere below the runs folder)."""
    try:
        return folder.read_value(path)[1]
    except StoreError as err:
        msg = f"{err.message}; this run cannot be recorded"
        raise RecordingError(msg) from None


def _read_text(folder: RunFolder, path: Path) -> str | None:
    """An attempt's ``stdout`` or ``stderr`` (cut at :data:`_TEXT_LIMIT` bytes), None when absent."""
    try:
        data = folder.read(path)
    except StoreError as err:
        msg = f"{err.message}; this run cannot be recorded"
        raise RecordingError(msg) from None
    if data is None:
        return None
    if len(data) > _TEXT_LIMIT:
        return data[:_TEXT_LIMIT].decode("utf-8", errors="replace") + "\n[cut by rho-notebook record]\n"
    return data.decode("utf-8", errors="replace")


def _step_of(folder: RunFolder, state: RunState, name: str, *, kind: str, digest: str) -> RecordedStep:
    record = state.nodes[name]
    current = record.current
    if current is None:
        return RecordedStep(kind=kind, digest=digest, state=record.state.value, message=record.reason)
    attempt = folder.files_of(name, current)
    text = kind in ("command", "shell", "python")
    return RecordedStep(
        kind=kind,
        digest=digest,
        state=record.state.value,
        attempt=current.number,
        message=current.message,
        exit=current.exit,
        value=_read_json(folder, attempt / VALUE_FILE),
        stdout=_read_text(folder, attempt / "stdout") if text else None,
        stderr=_read_text(folder, attempt / "stderr") if text else None,
    )


def _steps(folder: RunFolder, state: RunState, graph: Graph) -> dict[str, RecordedStep]:
    if graph.script is not None:
        steps: dict[str, RecordedStep] = {}
        for name, record in state.nodes.items():
            if record.step is None:
                continue
            kind, digest = str(record.step.get("kind")), str(record.step.get("digest"))
            steps[name] = _step_of(folder, state, name, kind=kind, digest=digest)
        return steps
    outputs = folder.output_values_at(state.value_sources())
    return {
        node.name: _step_of(
            folder,
            state,
            node.name,
            kind=node.kind,
            digest=node_digest(graph, node, lambda ref: outputs.get(ref, UNAVAILABLE)),
        )
        for node in graph.nodes
    }


def _copy_sources(sources: list[SourceText], graph: Graph, target: Path) -> list[Path]:
    """The plan's sources (and frozen Python modules) under ``target``, by label path."""
    texts: dict[str, str] = {source.label: source.text for source in sources}
    for module in graph.python_modules:
        texts.setdefault(module.label, module.text)
    written: list[Path] = []
    for label in sorted(texts):
        parts = PurePosixPath(label.removeprefix("//")).parts
        if not label.startswith("//") or not parts or any(p in ("", ".", "..") for p in parts):
            continue
        path = target.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, texts[label].encode(), durable=False)
        written.append(path)
    return written


_CONFTEST = '''"""Written by `rho-notebook record`: the copied sources are not tests (a script named test_*.py
would otherwise be collected and imported)."""

collect_ignore_glob = ["sources/*"]
'''


def _test_name(workflow: str) -> str:
    return re.sub(r"[^0-9a-zA-Z_]", "_", workflow).strip("_").lower() or "workflow"


def generated_test(recording: Recording) -> str:
    """The generated pytest file for ``recording``."""
    name = _test_name(recording.workflow)
    source = f"{recording.entry} (the current source in the workspace)"
    if recording.notebook is not None:
        source = f"the cell {recording.workflow!r} of {recording.notebook} (as it is now)"
    how = (
        "Command steps run for real (recorded with --live-commands); agent and model steps are answered\n"
        "from recording.json."
        if recording.live_commands
        else "Agent, model and command steps are all answered from recording.json (nothing is launched;\n"
        "record with --live-commands to run commands for real)."
    )
    return f'''"""Regression test for {recording.kind} workflow {recording.workflow!r}, recorded from run {recording.run_id}
by `rho-notebook record`.

Re-executes {source} with the recorded inputs and
asserts the same step keys, states and outputs as the recorded run. {how}
A step whose inputs changed (prompt, argv, agent, schema, cwd) fails, named with both digests.
"""

from pathlib import Path

from rho_notebook.service.record import replay_recording

HERE = Path(__file__).resolve().parent


def test_{name}_replays_its_recording() -> None:
    replayed = replay_recording(HERE, live_commands={recording.live_commands!r})
    assert replayed.steps
'''


def record_run(layout: StoreLayout, run_id: str, out_dir: Path, *, live_commands: bool = False) -> Recorded:
    """Write the recording, the sources and the pytest file of a finished run into ``out_dir``.

    Raises
    ------
    RecordingError
        The run has not finished, or its plan or attempts cannot be read.
    BadPath
        ``out_dir`` is a name the file system cannot hold, or a file stands where it or a folder
        above it must be (:func:`~rho_notebook.service.paths.make_folder`).
    """
    store = RunStore(layout)
    manifest = store.manifest(run_id)
    graph = store.graph(run_id, expected_digest=manifest.graph_digest)
    state = load_state(layout, run_id)
    if state.lifecycle is not Lifecycle.COMPLETED:
        raise RecordingError(not_completed(run_id, state.lifecycle, action="record"))
    try:
        plans = PlanStore(layout)
        plan = plans.load(manifest.plan_id)
        sources = plans.load_sources(plan)
    except RhoError as err:
        msg = (
            f"run {run_id[:13]}: its plan {manifest.plan_id[:13]} cannot be read ({err.message}); it cannot be recorded"
        )
        raise RecordingError(msg) from None
    folder = store.folder(run_id)
    steps = _steps(folder, state, graph)  # read (and refused) before DIR is made
    root = Path(manifest.workspace_root)
    notebook = _notebook_of(plan, sources, root, run_id=run_id)
    out_dir = make_folder(out_dir, argument="dir")
    recording = Recording(
        run_id=run_id,
        plan_id=manifest.plan_id,
        graph_digest=manifest.graph_digest,
        workflow=manifest.workflow,
        kind="script" if graph.script is not None else "graph",
        entry=plan.manifest.entry,
        workspace=os.path.relpath(root, out_dir.resolve()),
        inputs=dict(plan.manifest.inputs),
        live_commands=live_commands,
        outcome=state.outcome,
        output=state.output,
        steps=steps,
        notebook=notebook,
    )
    path = recording.save(out_dir)
    copies = _copy_sources(sources, graph, out_dir / "sources")
    test = out_dir / f"test_{_test_name(manifest.workflow)}.py"
    atomic_write(test, generated_test(recording).encode())
    conftest = out_dir / "conftest.py"
    if not conftest.exists() or conftest.read_text(errors="replace") == _CONFTEST:  # never replace the user's
        atomic_write(conftest, _CONFTEST.encode())
    return Recorded(
        run_id=run_id,
        folder=out_dir,
        recording=path,
        test=test,
        sources=tuple(copies),
        steps=len(recording.steps),
        live_commands=live_commands,
    )


def _notebook_of(plan: Plan, sources: list[SourceText], root: Path, *, run_id: str) -> str | None:
    """The notebook (relative to ``root``) whose cell ``plan`` was exported from, or None when its
    entry is a file of the workspace. A notebook's exported entry is labelled by the notebook's
    folder (docs/notebook.md), so the notebook is the one in that folder with a cell of the
    workflow's name; of several, the one whose cell is the frozen entry as it is now.

    Raises RecordingError: The entry is no file of the workspace and no one notebook is its source."""
    entry = root / plan.manifest.entry.removeprefix("//")
    if entry.is_file():
        return None
    name, folder = plan.manifest.workflow, entry.parent
    frozen = next((source.text for source in sources if source.label == plan.manifest.entry), None)
    found: list[tuple[Path, bool]] = []
    for candidate in sorted(folder.glob("*.ipynb")) if folder.is_dir() else ():
        try:
            cells = read_cells(candidate)
        except RhoError:
            continue
        cell = cells.workflows.get(name) or cells.scripts.get(name) or cells.graphs.get(name)
        if cell is not None:
            found.append((candidate, cell.text == frozen))
    same = [path for path, unchanged in found if unchanged]
    chosen = [path for path, _ in found] if len(found) == 1 else same
    if len(chosen) == 1:
        return os.path.relpath(chosen[0], root)
    where = os.path.relpath(folder, root)
    if not found:
        msg = (
            f"run {run_id[:13]}: its entry {plan.manifest.entry} is no file of the workspace {root}, and no notebook "
            f"in {where} has a cell named {name!r} to replay it from; restore the file or the notebook, then record again"
        )
    else:
        shown = ", ".join(os.path.relpath(path, root) for path, _ in found)
        msg = (
            f"run {run_id[:13]}: several notebooks in {where} have a cell named {name!r} ({shown}) and none is "
            "unchanged since the run; keep one, then record again"
        )
    raise RecordingError(msg)


# -- replaying -----------------------------------------------------------------------------------------


async def _start(layout: StoreLayout, recording: Recording, workspace: Workspace) -> tuple[Plan, str]:
    """Plan the recorded entry from the current workspace sources and create a run of it (reuse
    off, its digest confirmed: the generated test is the user's own code asking for it)."""
    from rho_notebook.service.service import Service  # service.py imports this module

    service = Service(layout=layout)
    if recording.notebook is not None:  # its cell is the source, as `run NOTEBOOK.ipynb` plans it
        notebook = workspace.root / recording.notebook
        python = (await asyncio.to_thread(notebook_interpreter, notebook)).path  # reads kernelspecs
        plan = await service.plan_notebook(
            notebook, workflow=recording.workflow, inputs=recording.inputs, python_interpreter=python
        )
    else:
        entry = workspace.root / recording.entry.removeprefix("//")
        plan = await service.plan(service.request_for(entry, inputs=recording.inputs, workspace=workspace))
    request = StartRun(plan=plan.plan_id, consent=Consent(yes=True), reuse=False)
    return plan, await service.create_run_of(plan, request)


async def _execute(
    layout: StoreLayout, run_id: str, recording: Recording, mismatches: Mismatches, *, live: bool, trusted: bool
) -> None:
    executors = recording_executors(recording, mismatches, real=default_executors(trusted=trusted), live_commands=live)
    if recording.kind == "script":

        def steps(**arguments: Any) -> RecordingStepRunner:
            return RecordingStepRunner(StepRunner(**arguments), recording, mismatches, live_commands=live)

        await execute_run(layout, run_id, resume=False, executors=executors, steps=steps)
        return
    await execute_run(layout, run_id, resume=False, executors=executors)


def _outcome(layout: StoreLayout, run_id: str, recording: Recording) -> tuple[dict[str, str], dict[str, Any], Any]:
    state = load_state(layout, run_id)
    folder = RunStore(layout).folder(run_id)
    states: dict[str, str] = {}
    values: dict[str, Any] = {}
    for name, record in state.nodes.items():
        if recording.kind == "script" and record.step is None:
            continue
        states[name] = record.state.value
        current = record.current
        values[name] = None if current is None else _read_json(folder, folder.files_of(name, current) / VALUE_FILE)
    return states, values, state.output


async def replay_recording_async(
    folder: Path, *, live_commands: bool | None = None, layout: StoreLayout | None = None
) -> Replayed:
    """Re-execute a recorded workflow against its recording (see the module docstring).

    Parameters
    ----------
    folder
        The DIR ``rho-notebook record`` wrote.
    live_commands
        Run command steps for real (None: as recorded, ``record --live-commands``).
    layout
        The store the replay run goes to (None: ``$RHO_NOTEBOOK_HOME``).

    Raises
    ------
    RecordingMismatch
        A step diverged, is missing or extra, or ended with another state or output; the message
        names each such step.
    """
    recording = await asyncio.to_thread(load_recording, folder)
    live = recording.live_commands if live_commands is None else live_commands
    layout = layout or StoreLayout.default()
    workspace = Workspace(root=recording.workspace_root(folder))
    plan, run_id = await _start(layout, recording, workspace)
    mismatches = Mismatches()
    trusted = TrustStore(layout).is_trusted(workspace)
    await _execute(layout, run_id, recording, mismatches, live=live, trusted=trusted)
    states, values, output = await asyncio.to_thread(_outcome, layout, run_id, recording)
    compare(recording, states=states, values=values, mismatches=mismatches, output=output)
    return Replayed(run_id=run_id, plan_id=plan.plan_id, steps=tuple(states))


def replay_recording(folder: Path | str, *, live_commands: bool | None = None) -> Replayed:
    """:func:`replay_recording_async` from synchronous code (a generated pytest file), through the
    background runner's loop, so it also works inside a running kernel."""
    return default_runner().call(replay_recording_async(Path(folder), live_commands=live_commands))
