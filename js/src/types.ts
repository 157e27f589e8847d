// The types of the DAG view. The wire shapes (layout, node and run views, the node pane, the REST
// answers) are generated from the TypedDicts of rho_notebook/service/wire.py into wire.gen.ts and
// re-exported here; this file keeps only what the front ends add on top: the state names the view
// colours, the widget's output chunks, the Change notification and the DagSource interface.

import type { Detail, NodeView, RunView, WireLayout } from "./wire.gen";

export type * from "./wire.gen";

/**
 * A node state the view knows how to draw: rho_notebook.model.state.NodeState (the wire types
 * carry it as a plain string; tests/unit/test_wire_types.py keeps this list equal to the enum).
 */
export type StateName =
  | "pending"
  | "ready"
  | "running"
  | "success"
  | "failure"
  | "denial"
  | "cancellation"
  | "skipped"
  | "blocked";

/**
 * A node's state as the run has it (a node view's `shown`, rho_notebook.service.wire.shown_state):
 * a StateName, or one that says more: `failure_allowed` (an allow_failure node failed: it does not
 * count against the run), `failure_handled` / `denial_handled` (a script went on from the step),
 * `waiting_for_approval` (a launch held for a person's decision: nothing started). The view styles
 * and counts nodes by it.
 */
export type ShownName = StateName | "failure_allowed" | "failure_handled" | "denial_handled" | "waiting_for_approval";

/** A piece of a running node's stdout or stderr, pushed by the kernel in a widget patch. */
export interface OutputChunk {
  node: string;
  attempt: number;
  stream: "stdout" | "stderr";
  start: number;
  end: number;
  text: string;
}

/** One field of a human step's form (the request's ``facts.form``). */
export interface FormField {
  type: "string" | "integer" | "bool" | "enum";
  required?: boolean;
  default?: unknown;
  choices?: unknown[];
  label?: string;
}

/**
 * A human step's pending form request, as the widget shows it (rho_notebook/widgets/_run.py
 * form_view): the question, the typed fields, and the message of the last refused answer.
 */
export interface FormRequestView {
  request_id: string;
  node: string;
  step: string;
  prompt: string;
  form: Record<string, FormField>;
  error?: string;
}

/** What changed since the last notification (absent: unchanged). */
export interface Change {
  nodes?: string[] | "all";
  run?: boolean;
  detail?: boolean;
  output?: OutputChunk[];
  selected?: boolean;
  layout?: boolean;
  forms?: boolean;
}

/** Everything the view reads and the two things it can ask for. Framework-free. */
export interface DagSource {
  layout(): WireLayout;
  title(): string;
  mode(): "plan" | "run";
  nodes(): Record<string, NodeView>;
  run(): RunView;
  detail(): Detail;
  selected(): string;
  /** Milliseconds to add to Date.now() to get the kernel's clock. */
  clockOffset(): number;
  subscribe(listener: (change: Change) => void): () => void;
  select(name: string): void;
  action(kind: "cancel" | "resume"): void;
  /** Pending form requests of human steps (a source without them: none). */
  forms?(): FormRequestView[];
  /** Answer a form with its values, or decline it (null); absent: forms are shown read-only. */
  answer?(request: string, values: Record<string, unknown> | null): void;
  /** The run's timeline rows (timeline.ts); absent: no Timeline tab. */
  timeline?(): Promise<import("./timeline").TimelineJson>;
  /** Fork the completed run at a node (forkform.ts); absent: no "fork from here" in the pane. */
  fork?(request: ForkRequest): Promise<ForkAnswer>;
}

/**
 * "Fork from here": `value` present, the node takes it (checked against its output schema);
 * absent, the node runs again. Without `graph_digest` the fork is only planned (the answer carries
 * the derived plan's ID and digest to confirm); with both, that planned fork starts when the digest
 * is its plan's.
 */
export interface ForkRequest {
  node: string;
  value?: unknown;
  plan_id?: string;
  graph_digest?: string;
}

/** A planned fork (`graph_digest` to confirm) or a started one (`run_id`); a refusal rejects. */
export interface ForkAnswer {
  plan_id?: string;
  graph_digest?: string;
  run_id?: string;
  summary?: string;
  message?: string;
}
