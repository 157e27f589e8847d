"""The DAG widget: an anywidget around the one front-end module (``static/dag.js``).

Synced traits carry the layout, the node views, the run view and the selected node's detail.
Live changes do not go through traits: a controller (see ``_run.py``) mutates ``nodes``, ``run``
and ``detail`` *in place* under :attr:`DagWidget.lock` and sends one custom ``patch`` message per
flush with only the changed nodes. ``get_state`` copies under the same lock, so a reconnecting
front end (or a saved widget state) always gets the current views. Traits are only ever assigned
on the kernel's main thread (construction and front-end message handlers).

Messages, front end -> kernel: ``{"kind": "hello"}`` (answered with a ``snapshot``),
``{"kind": "select", "node": name}``, ``{"kind": "action", "action": "cancel" | "resume"}``,
``{"kind": "answer", "request": request_id, "values": {field: value}}`` (a human step's form
submitted), ``{"kind": "decline", "request": request_id}`` and ``{"kind": "fork", "id", "node",
"value"?}`` / ``{"kind": "fork", "id", "node", "plan_id", "graph_digest"}`` ("fork from here" in the
node pane: plan, then start the confirmed plan; each answered by one ``fork_answer`` message
``{"id", "answer"}`` or ``{"id", "error"}``: see ``_fork.py``).
Kernel -> front end: ``snapshot`` and ``patch`` (``nodes``, ``run``, ``detail``, ``output``,
``forms``: the pending form requests, each with the ``error`` of a refused answer, and ``layout``
when a script run's layout grew: a new step is a new node).

Parent headers: the widget remembers the cell that created it; what it sends from another thread
(patches from the pump, the final snapshot's ``update_display``) carries that cell's parent,
never whichever cell is current, and never changes the kernel's current parent (``_parent.py``).

Static views: the bundle carries the DAG's picture (:mod:`rho_notebook.views.picture`: PNG, SVG,
text; no HTML, which untrusted JupyterLab would show sanitized instead of the PNG); a display
made by :meth:`DagWidget._ipython_display_` has a display id, and :meth:`DagWidget.refresh_static`
replaces its picture with the final DAG when the run stops.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from rho_notebook.views.dag import DagView
from rho_notebook.views.layout import Layout
from rho_notebook.views.picture import dag_bundle, picture_html, picture_metadata, run_subtitle
from rho_notebook.views.svg import render_svg
from rho_notebook.widgets._call import StaticViews
from rho_notebook.widgets._fork import fork_reply
from rho_notebook.widgets._parent import current_parent, guard_kernel_parent, owner_parent, send_comm_msg

__all__ = ["DagWidget", "STATIC"]

STATIC = Path(__file__).with_name("static")

_COPIED = ("nodes", "run", "detail", "graph_layout", "forms")

Answer = Callable[[str, dict[str, Any] | None], None]
"""(request ID, the form's values) answers a human step's form; values None declines it."""

Fork = Callable[[dict[str, Any]], dict[str, Any]]
"""The front end's ``fork`` message -> the planned or started fork (raises RhoError when refused)."""


class DagWidget(StaticViews, anywidget.AnyWidget):
    """Live or static DAG of a plan or run, with legend, counts, elapsed time and output pane."""

    _esm = STATIC / "dag.js"
    _css = STATIC / "dag.css"

    mode = traitlets.Unicode("plan").tag(sync=True)
    """``plan`` (a frozen graph, no run) or ``run``."""
    title = traitlets.Unicode("").tag(sync=True)
    graph_layout = traitlets.Dict().tag(sync=True)
    nodes = traitlets.Dict().tag(sync=True)
    run = traitlets.Dict().tag(sync=True)
    detail = traitlets.Dict().tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    forms: traitlets.List[dict[str, Any]] = traitlets.List().tag(sync=True)
    """Pending form requests of human steps (:func:`rho_notebook.widgets._run.form_view`)."""

    def __init__(
        self,
        view: DagView,
        *,
        on_select: Callable[[str], dict[str, Any]] | None = None,
        on_action: Callable[[str], None] | None = None,
        on_answer: Answer | None = None,
        lock: threading.RLock | None = None,
        on_fork: Fork | None = None,
    ) -> None:
        """The widget of ``view`` (:func:`rho_notebook.views.dag.dag_view`); ``on_select(node)``
        loads a node's pane, ``on_action("cancel" | "resume")`` acts on the run,
        ``on_answer(request, values)`` answers (values None: declines) a human step's form."""
        self.lock = lock or threading.RLock()
        self.layout_data = view.layout
        self.growing = view.script
        """A script run: its layout grows as steps launch (:meth:`grow`)."""
        self._on_select = on_select
        self._on_action = on_action
        self._on_answer = on_answer
        self.on_fork = on_fork
        """The "fork from here" of the node pane (``_fork.py``); None: the front end's fork is refused."""
        self._display_ids: list[str] = []
        self._displaying = threading.Lock()
        """Held while a picture is drawn and sent (:meth:`_ipython_display_`, :meth:`refresh_static`):
        a run that stops while the cell displays its view would otherwise send the final picture's
        update before the display it updates, and the front end drops an update of a display id it
        has not seen, so the saved cell would keep the running picture."""
        self.on_close: Callable[[], None] | None = None
        self.messages_sent = 0
        """Custom messages sent (patches and snapshots), for measurements."""
        self.subtitle = ""
        """The static picture's subtitle for a plan (a run's says which run, its lifecycle and outcome)."""
        self.static_text: str | None = None
        """Replaces the picture's ``text/plain`` in the static views (see :meth:`_static_views`)."""
        self.static_svg = True
        """Whether the static views carry the SVG (a run cell's carry only the PNG: display.py)."""
        self.owner_parent = current_parent()
        """The parent request of the cell that created the widget: messages sent from other
        threads carry it."""
        guard_kernel_parent()
        super().__init__(
            mode=view.mode,
            title=view.title,
            graph_layout=dict(view.layout.to_wire()),
            nodes={name: dict(node) for name, node in view.nodes.items()},
            run=dict(view.run or {}),
        )
        self.on_msg(self._handle_front_end)

    # -- state ------------------------------------------------------------------------------------

    def get_state(self, key: Any = None, drop_defaults: bool = False) -> dict[str, Any]:
        with self.lock:
            state: dict[str, Any] = super().get_state(key=key, drop_defaults=drop_defaults)
            for name in _COPIED:
                if name in state:
                    state[name] = copy.deepcopy(state[name])
        return state

    def close(self) -> None:
        """Close the comm and stop following the run (the controller's ``on_close``)."""
        on_close, self.on_close = getattr(self, "on_close", None), None
        if on_close is not None:
            on_close()
        super().close()

    def states(self) -> dict[str, str]:
        """Node -> displayed state (a node view's ``shown``, else its ``state``): what the view
        and its picture draw and count."""
        with self.lock:
            return {name: view.get("shown") or view.get("state", "pending") for name, view in self.nodes.items()}

    # -- messages ---------------------------------------------------------------------------------

    def grow(self, layout: Layout) -> dict[str, Any]:
        """Take a script run's new layout (a step appeared); call under :attr:`lock`. The trait
        is changed in place (any thread), so the caller sends the returned wire layout in its patch."""
        self.layout_data = layout
        wire = dict(layout.to_wire())
        self.graph_layout.clear()
        self.graph_layout.update(wire)
        return wire

    def send_patch(self, patch: dict[str, Any]) -> None:
        """Send one patch (built under :attr:`lock` by the caller); safe from any thread."""
        self.send({"kind": "patch", **patch})
        self.messages_sent += 1

    def send(self, content: dict[str, Any], buffers: Any = None) -> None:
        """A custom message; from a thread other than the kernel's main thread it carries the
        parent of the cell that created the widget (see the module docstring)."""
        if threading.current_thread() is not threading.main_thread() and self.comm is not None:
            message = {"method": "custom", "content": content}
            if send_comm_msg(self.comm, message, parent=self.owner_parent, buffers=buffers):
                return
        super().send(content, buffers)

    def _snapshot(self) -> dict[str, Any]:
        with self.lock:
            snapshot = {
                "kind": "snapshot",
                "nodes": copy.deepcopy(self.nodes),
                "run": copy.deepcopy(self.run),
                "detail": copy.deepcopy(self.detail),
                "forms": copy.deepcopy(self.forms),
            }
            if self.growing:
                snapshot["layout"] = copy.deepcopy(self.graph_layout)
            return snapshot

    def _handle_front_end(self, _widget: object, content: dict[str, Any], _buffers: object) -> None:
        kind = content.get("kind")
        if kind == "hello":
            self.send(self._snapshot())
            self.messages_sent += 1
        elif kind == "select":
            self.select(str(content.get("node") or ""))
        elif kind == "action" and self._on_action is not None:
            self._on_action(str(content.get("action")))
        elif kind in ("answer", "decline") and self._on_answer is not None:
            values = content.get("values")
            if kind == "answer" and not isinstance(values, dict):
                values = {}
            self._on_answer(str(content.get("request") or ""), values if kind == "answer" else None)
        elif kind == "fork":
            self.send({"kind": "fork_answer", **fork_reply(self.on_fork, content)})

    def select(self, name: str) -> None:
        """Select a node (empty string: none) and load its output pane."""
        if name and name not in self.nodes:
            return
        detail = self._on_select(name) if (name and self._on_select is not None) else {}
        with self.hold_sync(), self.lock:
            self.selected = name
            self.detail = detail

    # -- static view ------------------------------------------------------------------------------

    def _picture_args(self) -> dict[str, Any]:
        """What the static picture draws: displayed states, heading, a script run's halted steps."""
        with self.lock:
            run = dict(self.run)
            halted = [name for name, view in self.nodes.items() if view.get("halted")]
        subtitle = run_subtitle(run) if run else self.subtitle
        return {"states": self.states(), "title": self.title, "subtitle": subtitle, "halted": halted}

    def snapshot_svg(self) -> str:
        return render_svg(self.layout_data, **self._picture_args())

    def picture(self) -> dict[str, str]:
        """The static picture of the DAG as it stands (:func:`rho_notebook.views.picture.dag_bundle`)."""
        return dag_bundle(self.layout_data, **self._picture_args())

    def snapshot_html(self) -> str:
        """The picture as HTML that survives JupyterLab's sanitizer (a PNG ``<img>``), for
        widgets whose static view needs HTML around it."""
        return picture_html(self.picture())

    def _static_views(self) -> dict[str, str]:
        """The picture, without HTML: JupyterLab shows an untrusted output's first safe entry by
        rank, and an HTML entry would win over the PNG (see :mod:`rho_notebook.views.picture`).
        :attr:`static_text` replaces the picture's text; without :attr:`static_svg` the SVG is
        left out (a run's display: its saved text stays what the cell said)."""
        views = self.picture()
        timeline = getattr(self, "static_timeline", None)  # a stopped run's, set by widgets/_run.py
        if timeline is not None:  # the final picture shows where the time went under the DAG
            from rho_notebook.views.timeline_svg import with_timeline

            views = with_timeline(views, timeline)
        if self.static_text is not None:
            views["text/plain"] = self.static_text
        if not self.static_svg:
            views.pop("image/svg+xml", None)
        return views

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget view and the static picture, with the PNG's display size in the metadata
        and ``rho_notebook.picture``: what the picture shows (``plan``, or the run's lifecycle
        then, e.g. ``completed`` once :meth:`refresh_static` replaced it with the final DAG)."""
        with self.lock:
            shows = str(self.run.get("lifecycle") or "") if self.run else "plan"
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            return None
        data, metadata = bundle
        if "image/png" in data:
            metadata = {**metadata, **picture_metadata(data), "rho_notebook": {"picture": shows}}
        return data, metadata

    def _ipython_display_(self) -> None:
        """Display with a display id, so :meth:`refresh_static` can update the saved picture."""
        from IPython.display import display

        display_id = uuid.uuid4().hex
        with self._displaying:
            self._display_ids.append(display_id)
            data, metadata = self._repr_mimebundle_()
            display(data, metadata=metadata, raw=True, display_id=display_id)  # type: ignore[no-untyped-call]

    def refresh_static(self) -> None:
        """Replace the static picture in every output this widget was displayed in (the live view
        stays); called when a run stops, so a saved notebook shows the run's final DAG."""
        with self._displaying:  # after a display under way: its update must not overtake it
            self._refresh_displays()

    def _refresh_displays(self) -> None:
        if not self._display_ids:
            return
        from IPython.display import update_display

        data, metadata = self._repr_mimebundle_()
        if threading.current_thread() is threading.main_thread():
            parents: list[dict[str, Any] | None] = [None]
        else:
            # the cell that displayed it, and the cell running now: a front end that follows the
            # first (JupyterLab while that cell runs) or only the running cell (nbclient, so
            # `jupyter nbconvert --execute` and scripts/refresh_notebooks.py save the final
            # picture) gets it; an update of an unknown display id changes nothing anywhere
            now = current_parent()
            same = _msg_id(now) == _msg_id(self.owner_parent)
            parents = [self.owner_parent] if same or not now else [self.owner_parent, now]
        for parent in parents:
            with owner_parent(parent) if parent is not None else contextlib.nullcontext():
                for display_id in self._display_ids:
                    update_display(data, metadata=metadata, raw=True, display_id=display_id)  # type: ignore[no-untyped-call]


def _msg_id(parent: dict[str, Any]) -> str:
    return str((parent.get("header") or {}).get("msg_id") or "")
