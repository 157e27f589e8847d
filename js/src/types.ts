// Wire types of the DAG view. The Python side (rho_notebook/widgets/layout.py, _view.py) produces
// exactly these shapes; the JupyterLab sidebar can produce them from the server's REST answers.

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

export interface WireNode {
  name: string;
  kind: string;
  layer: number;
  x: number;
  y: number;
  needs: string[];
  conditional: boolean;
}

export interface WireEdge {
  source: string;
  target: string;
  condition: boolean;
  points: number[][];
}

export interface WireLayout {
  direction: "TB" | "LR";
  width: number;
  height: number;
  node_width: number;
  node_height: number;
  layers: number;
  nodes: WireNode[];
  edges: WireEdge[];
  edge_count: number;
  reduced_edge_count: number;
}

export interface NodeView {
  state: StateName;
  attempt: number;
  started_at?: string | null;
  ended_at?: string | null;
  reason?: string;
  exit_code?: number | null;
  uncertain?: boolean;
  v: number;
}

export interface RunView {
  run_id?: string;
  plan_id?: string;
  workflow?: string;
  graph_digest?: string;
  lifecycle?: string;
  outcome?: string | null;
  started_at?: string | null;
  ended_at?: string | null;
  cancel_pending?: boolean;
  can_cancel?: boolean;
  can_resume?: boolean;
  message?: string;
  v?: number;
}

export interface StreamView {
  text: string;
  bytes: number;
  start: number;
  end: number;
  truncated: boolean;
  limit: number;
}

export interface AttemptView {
  number: number;
  started_at: string;
  ended_at: string | null;
  pid: number | null;
  state: string | null;
  exit: Record<string, unknown> | null;
  message: string;
  uncertain: boolean;
  abandoned: boolean;
}

export interface Detail {
  node?: string;
  kind?: string;
  state?: StateName;
  reason?: string;
  attempt?: number;
  live?: boolean;
  definition?: Record<string, unknown>;
  attempts?: AttemptView[];
  exit?: Record<string, unknown> | null;
  answer?: StreamView | null;
  raw_answer?: StreamView | null;
  usage?: unknown;
  stdout?: StreamView | null;
  stderr?: StreamView | null;
  has_value?: boolean;
  value?: unknown;
}

export interface OutputChunk {
  node: string;
  attempt: number;
  stream: "stdout" | "stderr";
  start: number;
  end: number;
  text: string;
}

/** What changed since the last notification (absent: unchanged). */
export interface Change {
  nodes?: string[] | "all";
  run?: boolean;
  detail?: boolean;
  output?: OutputChunk[];
  selected?: boolean;
  layout?: boolean;
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
}
