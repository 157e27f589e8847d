"""Every error rho_notebook raises on purpose, rooted at :class:`RhoError`.

Errors carry structured, keyword-only fields (file, line, budget, ...) so that front ends can point
at the problem, and they pickle across process boundaries. Each class says how front ends report it:
``exit_code`` of the ``rho-notebook`` command (1 failed or invalid, 2 usage, 3 refused) and
``http_status`` of the REST answer (400 bad input, 404 not found, 409 conflict or refusal, 500 ours).

This module imports nothing of ours but :mod:`rho_notebook.diagnostics` (whose :class:`Diagnostic` it
re-exports: import it from here), so every layer may import it. Every public exception class of
the core layers lives here (tests/unit/test_module_shape.py); the few that are not :class:`RhoError`
are signals between two layers, at the end.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from rho_notebook.diagnostics import Diagnostic as Diagnostic  # re-exported: every layer imports it from here


class RhoError(Exception):
    """Root of every error rho_notebook raises deliberately."""

    rule = "error"
    exit_code: ClassVar[int] = 1
    """Exit status of the ``rho-notebook`` command: 1 failed or invalid, 2 usage, 3 refused."""
    http_status: ClassVar[int] = 400
    """Status of the REST answer: 400 bad input, 404 not found, 409 conflict or refusal, 500 ours."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.__dict__))

    def diagnostics(self) -> list[Diagnostic]:
        return [Diagnostic(rule=self.rule, message=self.message)]


def _rebuild(cls: type[RhoError], message: str, state: dict[str, Any]) -> RhoError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


class InvalidWorkflow(RhoError):
    """The workflow source or graph breaks one or more rules; holds every diagnostic found."""

    rule = "invalid"

    def __init__(self, found: list[Diagnostic]) -> None:
        if not found:
            msg = "InvalidWorkflow needs at least one diagnostic"
            raise ValueError(msg)
        super().__init__("\n".join(d.render() for d in found))
        self.found = list(found)

    def diagnostics(self) -> list[Diagnostic]:
        return list(self.found)


class SourceError(InvalidWorkflow):
    """Starlark source could not be loaded or evaluated (syntax, load rules, runtime errors)."""

    rule = "source"

    def __init__(
        self,
        message: str,
        *,
        rule: str = "source",
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__([Diagnostic(rule=rule, message=message, file=file, line=line, column=column)])
        self.rule = rule


class InputError(InvalidWorkflow):
    """A supplied input is missing, unknown, malformed or of the wrong type."""

    rule = "input"


class LimitError(InvalidWorkflow):
    """A named planning budget was exceeded."""

    rule = "limit"

    def __init__(
        self,
        *,
        budget: str,
        limit: int,
        measured: int,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        detail: str = "",
    ) -> None:
        extra = f" ({detail})" if detail else ""
        message = f"planning budget '{budget}' exceeded: accepted limit {limit}, measured {measured}{extra}"
        super().__init__([Diagnostic(rule=f"limit.{budget}", message=message, file=file, line=line, column=column)])
        self.budget, self.limit, self.measured = budget, limit, measured


class PlanError(RhoError):
    """A plan could not be created or loaded (resolution of executables or agents, store content)."""

    rule = "plan"
    http_status = 409


class StoreError(RhoError):
    """The durable store is unreadable, unsafe (symlinks, permissions) or inconsistent."""

    rule = "store"
    http_status = 500


class StoreUnsafe(StoreError):
    """A store folder others could write (group- or world-writable): refused, never used, because
    whoever can write it can plant or swap plans, runs and settings. The message names the folder,
    its mode and the ``chmod`` that fixes it."""

    rule = "store.unsafe"
    exit_code = 3
    http_status = 500

    def __init__(self, message: str, *, path: str, mode: int) -> None:
        super().__init__(message)
        self.path, self.mode = path, mode


class NotFound(StoreError):
    """No plan or run matches the given ID or prefix; ``listers`` are the verbs that list them
    (``runs``, ``plans``), named as ``rho-notebook`` commands unless a front end spells its own
    (:meth:`listed_with`)."""

    rule = "not_found"
    http_status = 404

    def __init__(self, message: str, *, listers: tuple[str, ...] = ()) -> None:
        self.problem, self.listers = message, listers
        super().__init__(self.listed_with("`rho-notebook {}`"))

    def listed_with(self, command: str, **spelled: str) -> str:
        """The message, its listing verbs spelled by ``command`` (a format with one ``{}``), or by
        ``spelled`` where a front end has its own (MCP: ``runs="the `workflow_runs` tool"``)."""
        hint = " and ".join(spelled.get(verb) or command.format(verb) for verb in self.listers)
        return f"{self.problem}; list them with {hint}" if hint else self.problem


class AmbiguousId(StoreError):
    """An ID prefix matches more than one plan or run."""

    rule = "ambiguous_id"
    http_status = 400


# -- notebook cells and export -----------------------------------------------------------------------


class NameMismatch(RhoError):
    """``%%workflow NAME`` names another workflow than the cell builds."""

    rule = "workflow.name"


class ExportError(RhoError):
    """The notebook cannot be exported as asked (no such workflow, malformed cell, unsafe target)."""

    rule = "export"


class RecordingError(RhoError):
    """A run cannot be recorded (not finished, unreadable) or a recording cannot be read."""

    rule = "recording"


class RecordingMismatch(RhoError):
    """A replay of a recorded run differs from its recording; ``steps`` names the steps that did."""

    rule = "recording.mismatch"

    def __init__(self, message: str, *, steps: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.steps = steps


# -- consent and approval ----------------------------------------------------------------------------


class ConfirmationRequired(RhoError):
    """A run or resume was asked for without confirming the exact graph digest."""

    rule = "confirmation_required"
    exit_code = 3
    http_status = 409


class PlanNotApproved(RhoError):
    """Plan approval is enforced and the graph digest has no approval record."""

    rule = "plan_not_approved"
    exit_code = 1
    """1, not 3: ``rho-notebook run`` has always exited 1 here (tests/cli/test_approvals.py)."""
    http_status = 409


class ApprovalRefused(RhoError):
    """A decision cannot be made here (inside a run's process tree, unknown or decided request)."""

    rule = "approval_refused"
    exit_code = 1
    """1, not 3: ``rho-notebook approve`` has always exited 1 here (tests/cli/test_approvals.py)."""
    http_status = 409


class AlreadyDecided(ApprovalRefused):
    """Someone else's decision (or answer) on the request stands; this one was not recorded. Every
    front end reports it the same way, so a caller is told it decided only when it did."""

    rule = "already_decided"
    exit_code = 3
    http_status = 409

    def __init__(self, message: str, *, standing: dict[str, Any]) -> None:
        super().__init__(message)
        self.standing = dict(standing)
        """The decision that stands (decision, by, at, via, comment, answer)."""


# -- runs --------------------------------------------------------------------------------------------


class RunRefused(RhoError):
    """The run cannot start or resume as asked (owned elsewhere, completed, plan changed)."""

    rule = "refused"
    exit_code = 3
    http_status = 409


class NeedsRecovery(RunRefused):
    """Uncertain attempts exist; resume needs --recover-uncertain after inspection."""

    rule = "needs_recovery"


class NothingToResume(RunRefused):
    """A completed run a resume would start nothing of (``problem``, runtime/recovery.py); its
    failed node ``fork_at`` a fork would run again, said as a ``rho-notebook fork`` command unless
    a front end words it its own way (:meth:`again_with`: MCP has no fork tool)."""

    def __init__(self, problem: str, *, run_id: str, plan_id: str, graph_digest: str, fork_at: str | None) -> None:
        self.problem, self.run_id, self.plan_id, self.graph_digest, self.fork_at = (
            problem, run_id, plan_id, graph_digest, fork_at
        )  # fmt: skip
        super().__init__(
            self.again_with("to run {node} again, fork the run at it: `rho-notebook fork {run} --at {node}`")
        )

    def again_with(self, fork: str) -> str:
        """The message; ``fork`` is a format of ``{node}``, ``{run}`` (short), ``{plan_id}``, ``{digest}``."""
        known = {"node": self.fork_at, "run": self.run_id[:13], "plan_id": self.plan_id, "digest": self.graph_digest}
        return self.problem if self.fork_at is None else f"{self.problem}; {fork.format(**known)}"


class TryRefused(RunRefused):
    """``try NODE`` cannot take its upstream values from the source run: an ancestor's definition
    changed since (``fields`` names what), is missing there, or did not succeed there."""

    rule = "try.upstream"

    def __init__(self, message: str, *, node: str, fields: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.node, self.fields = node, fields


class ForkRefused(TryRefused):
    """``fork RUN --at NODE`` cannot be planned (docs/fork.md); ``fields``: where a value does not fit."""

    rule = "fork"


class BudgetExceeded(RhoError):
    """A model call could pass a budget, so it was not made: the run halts ``needs_decision``."""

    rule = "budget"
    exit_code = 3
    http_status = 409

    def __init__(self, message: str, *, budget: str, limit: float, spent: float, node: str | None = None) -> None:
        super().__init__(message)
        self.budget, self.limit, self.spent, self.node = budget, limit, spent, node


# -- agents ------------------------------------------------------------------------------------------


class SettingsError(RhoError):
    """A settings document breaks the agent settings rules (message names the file and key)."""

    rule = "settings"


ProviderErrorKind = Literal["transport", "http", "auth", "rate_limited", "malformed", "timeout", "cancelled"]


class ProviderError(RhoError):
    """A provider call failed; ``kind`` says how, ``status`` is the HTTP status when there was one.
    Messages name the credential *reference*, never its value; ``retries``: each transport retry."""

    rule = "provider"
    http_status = 500

    def __init__(
        self,
        message: str,
        *,
        kind: ProviderErrorKind,
        status: int | None = None,
        retries: tuple[Any, ...] = (),
    ) -> None:
        super().__init__(message)
        self.kind: ProviderErrorKind = kind
        self.status = status
        self.retries = retries


class AnswerError(RhoError):
    """The final answer is not one JSON value (``not_json``) or does not match the schema (``schema``)."""

    rule = "answer"
    http_status = 500

    def __init__(self, message: str, *, kind: Literal["not_json", "schema"]) -> None:
        super().__init__(message)
        self.kind: Literal["not_json", "schema"] = kind


FailureKind = Literal[
    "config", "credential", "transport", "http", "auth", "rate_limited", "malformed", "timeout", "cancelled",
    "node_timeout", "tool_budget", "turn_budget", "truncated", "empty_answer", "not_json", "schema", "too_large",
    "template", "claude",
]  # fmt: skip
FAILURE_KINDS: tuple[str, ...] = FailureKind.__args__  # type: ignore[attr-defined]
"""Every way an agent attempt can fail (``usage.json`` ``failure.kind``); see docs/providers.md."""


class AgentFailure(RhoError):
    """An agent attempt failed; ``kind`` is one of :data:`FAILURE_KINDS`."""

    rule = "agent"
    http_status = 500

    def __init__(self, message: str, *, kind: FailureKind, status: int | None = None) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind
        self.status = status


# -- launching frozen executables --------------------------------------------------------------------

VerifyReason = Literal[
    "invalid_path",
    "invalid_digest",
    "missing",
    "symlink",
    "not_directory",
    "not_regular",
    "unreadable",
    "identity",
    "content",
    "changed",
]


class VerificationError(RhoError):
    """A frozen file or directory is missing, unsafe, or differs from what the plan pinned."""

    rule = "verify"
    http_status = 409

    def __init__(self, message: str, *, path: str, reason: VerifyReason) -> None:
        super().__init__(message)
        self.path = path
        self.reason: VerifyReason = reason


class UnsupportedPlatform(RhoError):
    """Frozen command execution cannot keep its handle-based guarantee on this system."""

    rule = "unsupported_platform"
    http_status = 500


class LaunchError(RhoError):
    """A verified process could not be started (exec failure, unsupported ``#!`` chain)."""

    rule = "launch"
    http_status = 500


class StepInvalid(RhoError):
    """A script step's arguments cannot run: a bad argv, cwd, budget, agent, provider or schema
    (the step is refused before anything is journaled for it)."""

    rule = "step.invalid"


class DecisionNeedsPerson(RunRefused):
    """A decision a model-facing tool (MCP) may not make: a halted script step whose halt is not a
    ``recovery="manual"`` one (an uncertain launch, an unreadable result), or a step that is not
    halted. ``command`` is what a person runs to decide it."""

    rule = "decision_needs_person"

    def __init__(self, message: str, *, run_id: str, step: str, command: str) -> None:
        super().__init__(message)
        self.run_id, self.step, self.command = run_id, step, command


# -- distributed executors (docs/distributed.md) -------------------------------------------------


class ExecutorInvalid(RhoError):
    """An executor choice (``--executor``, ``executor=``, settings ``dask_scheduler`` or
    ``dask_path_map``) that is not one we know how to run with; the message names what was given."""

    rule = "executor.invalid"
    exit_code = 2

    def __init__(self, message: str, *, given: str) -> None:
        super().__init__(message)
        self.given = given


class DaskNotInstalled(RhoError):
    """A run asked for the Dask executor but ``distributed`` cannot be imported here."""

    rule = "executor.dask_missing"
    exit_code = 2

    def __init__(self, message: str = "", *, reason: str = "") -> None:
        super().__init__(
            message
            or (
                "the Dask executor needs the `distributed` package, which is not importable here"
                + (f" ({reason})" if reason else "")
                + ": install it with `pip install rho-notebook[dask]` (on the run owner and every worker), "
                "or run with `--executor local`"
            )
        )
        self.reason = reason


class MappingError(RhoError):
    """An item-graph mapping string (``"={{ $json.a.b }}"``) does not parse (docs/graphs.md)."""

    rule = "graph.mapping_syntax"

    def __init__(self, message: str, *, text: str) -> None:
        super().__init__(message)
        self.text = text


class ItemTooLarge(RhoError):
    """An item-graph step produced an item larger than the ``item_bytes`` planning limit."""

    rule = "limit.item_bytes"

    def __init__(self, *, step: str, limit: int, measured: int, largest: tuple[tuple[str, int], ...] = ()) -> None:
        fields = ", ".join(f"{name!r} {size} bytes" for name, size in largest)
        super().__init__(
            f"step {step!r}: the item is {measured} bytes (canonical JSON), over the 'item_bytes' limit of "
            f"{limit} bytes" + (f"; its largest fields: {fields}" if fields else "") + "; keep the item lean: "
            "carry IDs or paths of bulky data instead of the data"
        )
        self.step, self.limit, self.measured = step, limit, measured
        self.largest = largest
        """(field, bytes of its value as canonical JSON) of the item's largest top-level fields."""


class CodeStepError(RhoError):
    """An item-graph ``code`` step failed (``code.error``, ``code.load``, ``code.result`` or
    ``limit.<budget>``); ``line`` and ``column`` point into the step's source when known."""

    rule = "code.error"

    def __init__(
        self,
        detail: str,
        *,
        step: str,
        rule: str = "code.error",
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        where = f"line {line}:{column or 1}: " if line is not None else ""
        super().__init__(f"code step {step!r}: {where}{detail}")
        self.step, self.rule, self.line, self.column = step, rule, line, column


class AttemptUncertain(RhoError):
    """A remote attempt's result is lost (its worker died, its future was lost): it may have run.
    The driver journals ``attempt_uncertain`` instead of a result; the resume rules apply."""

    rule = "attempt_uncertain"


class NotConvertible(InvalidWorkflow):
    """``convert FILE.graph.yaml``: the item graph has no faithful Starlark equivalent."""

    rule = "convert"
    exit_code: ClassVar[int] = 2


class BadArgument(RhoError):
    """An argument outside the values it accepts (``runs --limit 0``): a usage error, exit 2."""

    rule = "usage"
    exit_code = 2
    http_status = 400


class BadPath(BadArgument):
    """A path the file system cannot use as asked (a NUL byte, a name too long, a file where a
    folder must be): exit 2 before anything is read or written, naming the argument and path."""

    rule = "usage.path"

    def __init__(self, message: str, *, argument: str, path: str) -> None:
        super().__init__(message)
        self.argument, self.path = argument, path


class TrustRefused(RhoError):
    """``trust PATH`` names a folder that does not exist or cannot be looked at: nothing recorded."""

    rule = "trust.refused"
    exit_code = 3
    http_status = 409

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


# -- signals between layers (not RhoError: callers turn them into their own errors) -------------------


class NotRegularFile(OSError):
    """An entry that should be a regular file is a directory, FIFO, socket or device."""


class UnavailableValue(Exception):
    """A template referenced an output that does not exist (the referenced node did not succeed)."""


class UnlistableAggregate(UnavailableValue):
    """An aggregate step's ``over`` is missing, not a list or over ``max_items``; the message says which."""


class NoReuseKey(Exception):
    """The node has no reuse key now (it is launched as usual); the message says why."""


class WorkerStopped(Exception):
    """The worker was stopped at its wall budget or died (a limit, a crash); ``diagnostic`` has the
    shape of a worker's error diagnostic: ``rule``, ``message`` and, for a budget, ``budget``,
    ``limit`` and ``measured``. Callers turn it into their own error."""

    def __init__(self, diagnostic: dict[str, Any]) -> None:
        super().__init__(diagnostic["message"])
        self.diagnostic = diagnostic


class ArgumentError(Exception):
    """A magic line that does not parse; the message says what to write instead."""


class HelpShown(Exception):
    """``--help`` was asked for and printed."""
