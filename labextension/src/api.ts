// The client of the rho_notebook jupyter-server API (/rho/api/, see docs/jupyterlab.md).
// Every request goes through ServerConnection.makeRequest, which adds jupyter-server's token and
// XSRF headers; the event stream is read with fetch (not EventSource) for the same reason.

import { URLExt } from "@jupyterlab/coreutils";
import { ServerConnection } from "@jupyterlab/services";

import type {
  ApprovalJson,
  CancelJson,
  Detail,
  DiffJson,
  ForkAnswer,
  ForkRequest,
  NodeView,
  PlanJson,
  RunRowJson,
  RunView,
  StatusJson,
  WireLayout,
} from "@rho-notebook/dagview";

// The answers are the wire types generated from rho_notebook/service/wire.py
// (@rho-notebook/dagview re-exports js/src/wire.gen.ts). The three shapes below are not declared
// there yet: the /view answer, the journal records of the event stream (wire.py: EventJson, an open
// dict) and the stream's `end` event.

/** GET runs/<id>/view: the run's DAG view, as the widget shows it. */
export interface RunViewData {
  title: string;
  mode: "run";
  now: string;
  last_seq: number;
  nodes: Record<string, NodeView>;
  run: RunView;
  layout?: WireLayout;
}

/** One journal record of the event stream (docs/running.md lists the kinds and their keys). */
export interface JournalRecord {
  seq: number;
  kind: string;
  run_id: string;
  at: string;
  node?: string;
  [key: string]: unknown;
}

/** The `end` event of the stream: the run is no longer owned. */
export interface StreamEnd {
  run_id: string;
  last_seq: number;
  lifecycle: string;
  outcome: StatusJson["outcome"];
}

/** One run's side of a node in GET runs/<old>/compare/<new> (server/_compare.py). */
export interface CompareSide {
  state: string;
  exit_code: number | null;
  value_sha256: string | null;
  preview: string;
}

/** GET runs/<old>/compare/<new>: the plan diff as `diff` shows it, and per node what changed. */
export interface CompareJson {
  old_run: string;
  new_run: string;
  plan: DiffJson;
  text: string[];
  nodes: { node: string; old: CompareSide | null; new: CompareSide | null; changed: string[] }[];
  changed_nodes: number;
}

/** An error answer of the API: {"message", "rule"}. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly rule: string,
  ) {
    super(message);
  }
}

export class RhoApi {
  readonly settings: ServerConnection.ISettings;

  constructor(settings?: ServerConnection.ISettings) {
    this.settings = settings ?? ServerConnection.makeSettings();
  }

  url(...parts: string[]): string {
    return URLExt.join(this.settings.baseUrl, "rho", "api", ...parts.map(encodeURIComponent));
  }

  async request<T>(method: string, parts: string[], body?: unknown, query = ""): Promise<T> {
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { "Content-Type": "application/json" };
    }
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(this.url(...parts) + query, init, this.settings);
    } catch (error) {
      throw new ApiError(0, `cannot reach the server: ${String(error)}`, "network");
    }
    const text = await response.text();
    let data: unknown = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!response.ok) {
      const info = (data ?? {}) as { message?: string; rule?: string };
      throw new ApiError(response.status, info.message ?? `${response.status} ${response.statusText}`, info.rule ?? "http");
    }
    return data as T;
  }

  plans(): Promise<PlanJson[]> {
    return this.request("GET", ["plans"]);
  }
  plan(planId: string): Promise<PlanJson & { layout: WireLayout }> {
    return this.request("GET", ["plans", planId]);
  }
  deletePlan(planId: string): Promise<unknown> {
    return this.request("DELETE", ["plans", planId]);
  }
  startRun(planId: string, graphDigest: string, mode = "auto"): Promise<StatusJson> {
    return this.request("POST", ["plans", planId, "runs"], { graph_digest: graphDigest, mode });
  }
  runs(limit = 200): Promise<RunRowJson[]> {
    return this.request("GET", ["runs"], undefined, `?limit=${limit}`);
  }
  view(runId: string, withLayout: boolean): Promise<RunViewData> {
    return this.request("GET", ["runs", runId, "view"], undefined, withLayout ? "" : "?layout=0");
  }
  detail(runId: string, node: string): Promise<Detail> {
    return this.request("GET", ["runs", runId, "nodes", node]);
  }
  cancel(runId: string): Promise<CancelJson> {
    return this.request("POST", ["runs", runId, "cancel"], {});
  }
  resume(runId: string, graphDigest: string, recoverUncertain = false): Promise<StatusJson> {
    return this.request("POST", ["runs", runId, "resume"], { graph_digest: graphDigest, recover_uncertain: recoverUncertain });
  }
  /**
   * Fork the completed run at a node (POST runs/<run>/fork): without `graph_digest` the fork is
   * planned and its derived plan's ID and digest answered (nothing starts); with that `plan_id` and
   * `graph_digest`, exactly that planned fork starts. A value that does not match the node's output
   * schema is refused (400) naming the field.
   */
  fork(runId: string, request: ForkRequest): Promise<ForkAnswer> {
    return this.request("POST", ["runs", runId, "fork"], request);
  }
  deleteRun(runId: string): Promise<unknown> {
    return this.request("DELETE", ["runs", runId]);
  }
  compare(oldRun: string, newRun: string): Promise<CompareJson> {
    return this.request("GET", ["runs", oldRun, "compare", newRun]);
  }
  approvals(runId: string): Promise<ApprovalJson[]> {
    return this.request("GET", ["runs", runId, "approvals"]);
  }
  decide(runId: string, requestId: string, decision: "approve" | "deny", comment: string): Promise<unknown> {
    return this.request("POST", ["runs", runId, "approvals", requestId], { decision, comment: comment || null });
  }
  /** Answer a human step's form (a request of kind "form"); a wrong value is refused (400) naming its field. */
  answer(runId: string, requestId: string, values: Record<string, unknown>, comment: string): Promise<unknown> {
    return this.request("POST", ["runs", runId, "approvals", requestId, "answer"], { values, comment: comment || null });
  }

  /**
   * Follow the run's journal as SSE from `afterSeq`, reconnecting with Last-Event-ID after a
   * network error, until the server sends `end` (the run is no longer owned) or `stop()` is called.
   */
  follow(
    runId: string,
    afterSeq: number,
    handlers: { record: (r: JournalRecord) => void; end: (e: StreamEnd) => void; error?: (message: string) => void },
  ): () => void {
    const abort = new AbortController();
    let last = afterSeq;
    let stopped = false;
    const run = async (): Promise<void> => {
      while (!stopped) {
        try {
          const response = await ServerConnection.makeRequest(
            this.url("runs", runId, "events"),
            { method: "GET", headers: { "Last-Event-ID": String(last), Accept: "text/event-stream" }, signal: abort.signal },
            this.settings,
          );
          if (!response.ok || !response.body) {
            handlers.error?.(`event stream: ${response.status} ${response.statusText}`);
            if (response.status === 404 || response.status === 403) return;
          } else {
            const reader = response.body.getReader();
            const decoder = new TextDecoder();
            let buffer = "";
            for (;;) {
              const { value, done } = await reader.read();
              if (done) break;
              buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
              let cut: number;
              while ((cut = buffer.indexOf("\n\n")) >= 0) {
                const block = buffer.slice(0, cut);
                buffer = buffer.slice(cut + 2);
                const message = parseBlock(block);
                if (!message) continue;
                if (message.event === "end") {
                  handlers.end(JSON.parse(message.data) as StreamEnd);
                  return;
                }
                if (message.event === "error") {
                  handlers.error?.((JSON.parse(message.data) as { message: string }).message);
                  return;
                }
                const record = JSON.parse(message.data) as JournalRecord;
                if (record.seq > last) {
                  last = record.seq;
                  handlers.record(record);
                }
              }
            }
          }
        } catch (error) {
          if (stopped) return;
        }
        await new Promise((resolve) => setTimeout(resolve, 2000));
      }
    };
    void run();
    return () => {
      stopped = true;
      abort.abort();
    };
  }
}

function parseBlock(block: string): { event: string; data: string; id: string | null } | null {
  let event = "message";
  let id: string | null = null;
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  return data.length ? { event, data: data.join("\n"), id } : null;
}
