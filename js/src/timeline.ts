// The Timeline tab beside the DAG (the notebook widget and the JupyterLab sidebar): where a run's
// time went. One row per node or script step, one bar per attempt from launch to finish, queued
// time (ready -> launched) shaded before it, earlier attempts (retries) drawn hatched, waits for a
// person marked, the critical path outlined; the hover says what the row's attempt did and, when
// the node view carries one, its ledger (`usage`: tokens, calls, retries, wall time, cost).
//
// The rows are folded by rho_notebook/views/timeline.py (timeline_of); a source gets them with
// `DagSource.timeline()` (the sidebar: GET runs/<run>/timeline; the widget: a "timeline" action
// answered by the kernel). The pure parts (segments, hover text) are exported for the unit tests.

import { formatDuration } from "./model";
import type { DagSource, NodeView } from "./types";

/** One attempt of a row (views/timeline.py BarJson); times in seconds from the origin. */
export interface TimelineBar {
  attempt: number;
  queued: number | null;
  launched: number;
  started: number | null;
  finished: number | null;
  state: string;
  retry: boolean;
  waits: (number | null)[][];
  reused?: boolean;
  instances?: number;
}

export interface TimelineRow {
  name: string;
  kind: string;
  needs: string[];
  state: string;
  bars: TimelineBar[];
  critical: boolean;
  decided?: number;
  replays?: number[];
}

/** GET runs/<run>/timeline (views/timeline.py TimelineJson). */
export interface TimelineJson {
  run_id: string;
  origin: string | null;
  now: string;
  span: number;
  rows: TimelineRow[];
  critical_path: string[];
  running: boolean;
}

/** A node view's ledger, when the run has one (issue 34: service/usage.py); every field optional. */
export interface UsageView {
  input_tokens?: number;
  output_tokens?: number;
  cached_tokens?: number;
  calls?: number;
  retries?: number;
  wall_seconds?: number;
  cost_usd?: number | null;
  reasoning_tokens?: number;
  tool_calls?: number;
  /** What a reused node or a replayed step did not spend again. */
  saved?: UsageView;
}

export type SegmentKind = "queued" | "run" | "retry" | "wait" | "mark";

/** A drawn piece of a row, in pixels from the bars' left edge. */
export interface Segment {
  kind: SegmentKind;
  x: number;
  width: number;
  attempt: number;
  state: string;
}

const MIN_WIDTH = 2;

/**
 * The pieces of `row` on a scale of `span` seconds to `width` pixels: per attempt its queued
 * stretch, its bar (a retry when an earlier attempt than the last; an open bar runs to the span's
 * end), its waits for a person; a reused attempt or a replay is a zero-length mark.
 */
export function segments(row: TimelineRow, span: number, width: number): Segment[] {
  const scale = width / (span > 0 ? span : 1);
  const piece = (kind: SegmentKind, start: number, end: number | null, bar: TimelineBar | null): Segment => {
    const x = Math.max(0, start * scale);
    const stop = (end ?? span) * scale;
    return { kind, x, width: Math.max(MIN_WIDTH, stop - x), attempt: bar?.attempt ?? 0, state: bar?.state ?? row.state };
  };
  const found: Segment[] = [];
  for (const bar of row.bars) {
    if (bar.queued !== null) found.push(piece("queued", bar.queued, bar.launched, bar));
    if (bar.reused) {
      found.push(piece("mark", bar.launched, bar.launched, bar));
      continue;
    }
    found.push(piece(bar.retry ? "retry" : "run", bar.launched, bar.finished, bar));
    for (const [start, end] of bar.waits) if (start !== null && start !== undefined) found.push(piece("wait", start, end ?? null, bar));
  }
  for (const at of row.replays ?? []) found.push(piece("mark", at, at, null));
  return found;
}

function count(n: number | undefined, one: string, many = `${one}s`): string {
  const value = n ?? 0;
  return `${value.toLocaleString("en-US")} ${value === 1 ? one : many}`;
}

/** The ledger lines of a node view's `usage` (none when the view has no usage). */
export function usageLines(view: NodeView | undefined): string[] {
  const usage = (view as (NodeView & { usage?: UsageView }) | undefined)?.usage;
  if (!usage || typeof usage !== "object") return [];
  const tokens = `tokens: ${count(usage.input_tokens, "in", "in")} \u00b7 ${count(usage.output_tokens, "out", "out")}` +
    (usage.cached_tokens ? ` \u00b7 ${count(usage.cached_tokens, "cached", "cached")}` : "");
  const calls = `${count(usage.calls, "model call")}, ${count(usage.retries, "retry", "retries")}`;
  const wall = usage.wall_seconds !== undefined ? `, ${formatDuration(usage.wall_seconds * 1000)}` : "";
  const cost = usage.cost_usd === null || usage.cost_usd === undefined ? "cost: unknown (no price)" : `cost: $${usage.cost_usd.toFixed(4)}`;
  const found = [tokens, calls + wall, cost];
  if (usage.reasoning_tokens) found.splice(1, 0, `(${count(usage.reasoning_tokens, "reasoning token")} in the output)`);
  const saved = usage.saved;
  if (saved && (saved.input_tokens || saved.output_tokens || saved.calls)) {
    found.push(`saved (reused or replayed): ${count(saved.input_tokens, "in", "in")} \u00b7 ${count(saved.output_tokens, "out", "out")}, ${count(saved.calls, "model call")}`);
  }
  return found;
}

/** What the hover of `row`'s attempt `bar` says (and the row's ledger when `view` has one). */
export function hoverText(row: TimelineRow, bar: TimelineBar | null, view?: NodeView): string {
  const lines = [`${row.name} \u2014 ${row.state}${row.critical ? " \u00b7 critical path" : ""}`];
  if (bar) {
    const took = bar.finished === null ? "running" : formatDuration((bar.finished - bar.launched) * 1000);
    lines.push(`attempt ${bar.attempt}${bar.retry ? " (earlier attempt: retried)" : ""}: ${bar.state}, ${took}`);
    if (bar.queued !== null) lines.push(`queued ${formatDuration((bar.launched - bar.queued) * 1000)} before launch`);
    const waited = bar.waits.reduce((sum, [start, end]) => sum + ((end ?? start ?? 0) - (start ?? 0)), 0);
    if (bar.waits.length) lines.push(`waited ${formatDuration(waited * 1000)} for a person`);
    if (bar.reused) lines.push("reused a stored success: nothing ran");
    if (bar.instances) lines.push(count(bar.instances, "instance"));
  } else if (row.decided !== undefined) {
    lines.push(`${row.state} at ${formatDuration(row.decided * 1000)}`);
  }
  if (row.replays?.length) lines.push(`replayed from the journal ${count(row.replays.length, "time")}`);
  return [...lines, ...usageLines(view)].join("\n");
}

const SEGMENT_FILL: Record<SegmentKind, (state: string) => string> = {
  queued: () => "var(--rho-state-ready-bg)",
  run: (state) => `var(--rho-state-${state}, var(--rho-muted))`,
  retry: (state) => `var(--rho-state-${state}-bg, var(--rho-line))`,
  wait: () => "var(--rho-state-waiting_for_approval)",
  mark: () => "var(--rho-state-skipped)",
};

function esc(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] as string);
}

const ROW = 22;
const AXIS = 20;

/** The timeline's SVG markup `width` pixels wide (labels, axis, rows), hovers from `nodes`. */
export function timelineSvg(data: TimelineJson, nodes: Record<string, NodeView>, width: number): string {
  const labelWidth = Math.min(180, 12 + 7 * Math.max(4, ...data.rows.map((r) => r.name.length)));
  const barsWidth = Math.max(80, width - labelWidth - 12);
  const height = AXIS + ROW * data.rows.length + 4;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="rho-tl-svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">`,
    `<defs><pattern id="rho-tl-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">` +
      `<line x1="0" y1="0" x2="0" y2="6" stroke="currentColor" stroke-opacity="0.45" stroke-width="2"/></pattern></defs>`,
  ];
  const ticks = 4;
  for (let i = 0; i <= ticks; i += 1) {
    const x = labelWidth + (barsWidth * i) / ticks;
    parts.push(`<g class="rho-tl-tick"><line x1="${x}" y1="${AXIS - 4}" x2="${x}" y2="${height}" stroke="currentColor" stroke-opacity="0.12"/>` +
      `<text x="${x}" y="${AXIS - 7}" font-size="10" text-anchor="${i === 0 ? "start" : i === ticks ? "end" : "middle"}" fill="currentColor">${esc(formatDuration((data.span * 1000 * i) / ticks))}</text></g>`);
  }
  data.rows.forEach((row, index) => {
    const y = AXIS + index * ROW;
    const title = esc(hoverText(row, row.bars[row.bars.length - 1] ?? null, nodes[row.name]));
    const cls = `rho-tl-row${row.critical ? " rho-tl-critical" : ""}`;
    parts.push(`<g class="${cls}" data-node="${esc(row.name)}" data-state="${esc(row.state)}" transform="translate(0,${y})"><title>${title}</title>`);
    parts.push(`<text class="rho-tl-label" x="4" y="${ROW / 2 + 4}" font-size="11" fill="currentColor"${row.critical ? ' font-weight="bold"' : ""}>${esc(row.name)}</text>`);
    for (const seg of segments(row, data.span, barsWidth)) {
      const x = (labelWidth + seg.x).toFixed(1);
      const tall = seg.kind === "queued" || seg.kind === "wait" ? 6 : 14;
      const top = seg.kind === "wait" ? ROW - 7 : (ROW - tall) / 2;
      const bar = row.bars.find((b) => b.attempt === seg.attempt) ?? null;
      const fill = seg.kind === "retry" ? "url(#rho-tl-hatch)" : SEGMENT_FILL[seg.kind](seg.state);
      const stroke = seg.kind === "run" && row.critical ? ' stroke="currentColor" stroke-width="1.5"' : seg.kind === "retry" ? ` stroke="${SEGMENT_FILL.run(seg.state)}"` : "";
      parts.push(`<rect class="rho-tl-seg rho-tl-${seg.kind}" data-attempt="${seg.attempt}" data-state="${esc(seg.state)}" x="${x}" y="${top}" width="${seg.width.toFixed(1)}" height="${tall}" rx="2" fill="${fill}"${stroke}>` +
        `<title>${esc(hoverText(row, bar, nodes[row.name]))}</title></rect>`);
    }
    parts.push(`</g>`);
  });
  parts.push(`</svg>`);
  return parts.join("");
}

const REFRESH_MS = 1000;

/**
 * Add the "DAG | Timeline" tabs to a run's view `el` (renderDag's element; `body` its DAG and
 * pane): the Timeline tab fetches the rows from `source.timeline()` when shown, and again (at most
 * once a second) while the run changes. Returns the cleanup.
 */
export function mountTimeline(el: HTMLElement, body: HTMLElement, source: DagSource): () => void {
  const load = source.timeline?.bind(source);
  if (!load || source.mode() !== "run") return () => undefined;
  const tabs = document.createElement("div");
  tabs.className = "rho-tabs";
  tabs.setAttribute("role", "tablist");
  const tab = (label: string, name: string): HTMLButtonElement => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = `rho-btn rho-tab rho-tab-${name}`;
    button.setAttribute("role", "tab");
    button.textContent = label;
    tabs.append(button);
    return button;
  };
  const dagTab = tab("DAG", "dag");
  const timelineTab = tab("Timeline", "timeline");
  const panel = document.createElement("div");
  panel.className = "rho-timeline";
  panel.hidden = true;
  const note = document.createElement("div");
  note.className = "rho-tl-note";
  const drawing = document.createElement("div");
  drawing.className = "rho-tl-drawing";
  panel.append(note, drawing);
  (el.querySelector(".rho-toolbar") ?? body).after(tabs);
  body.after(panel);
  let shown = false;
  let last: TimelineJson | null = null;
  let timer = 0;
  let loading = false;
  const draw = (): void => {
    if (!last) return;
    const width = Math.max(320, panel.clientWidth || el.clientWidth || 640);
    const path = last.critical_path.join(" \u2192 ");
    note.textContent = `${last.rows.length} rows \u00b7 ${formatDuration(last.span * 1000)}${last.running ? " so far" : ""}` +
      (path ? ` \u00b7 critical path: ${path}` : "") + " \u00b7 shaded: queued \u00b7 hatched: earlier attempt \u00b7 amber: waiting for a person";
    drawing.innerHTML = timelineSvg(last, source.nodes(), width - 8);
    panel.dataset.rows = String(last.rows.length);
  };
  const refresh = (): void => {
    if (!shown || loading) return;
    loading = true;
    load()
      .then((data) => {
        last = data;
        draw();
      })
      .catch((error: unknown) => {
        note.textContent = `timeline: ${error instanceof Error ? error.message : String(error)}`;
      })
      .finally(() => {
        loading = false;
      });
  };
  const select = (timeline: boolean): void => {
    shown = timeline;
    dagTab.setAttribute("aria-selected", String(!timeline));
    timelineTab.setAttribute("aria-selected", String(timeline));
    body.hidden = timeline;
    panel.hidden = !timeline;
    el.dataset.tab = timeline ? "timeline" : "dag";
    if (timeline) refresh();
  };
  dagTab.addEventListener("click", () => select(false));
  timelineTab.addEventListener("click", () => select(true));
  const unsubscribe = source.subscribe((change) => {
    if (!shown || !(change.nodes || change.run || change.layout) || timer) return;
    timer = window.setTimeout(() => {
      timer = 0;
      refresh();
    }, REFRESH_MS);
  });
  select(false);
  return () => {
    unsubscribe();
    if (timer) window.clearTimeout(timer);
    tabs.remove();
    panel.remove();
    body.hidden = false;
  };
}

/** The subset of an anywidget model the widget's timeline request uses. */
export interface TimelineModel {
  send(content: Record<string, unknown>): void;
  on(event: "msg:custom", callback: (msg: { kind?: string; timeline?: TimelineJson; error?: string }) => void): void;
  off(event: "msg:custom", callback: (msg: { kind?: string; timeline?: TimelineJson; error?: string }) => void): void;
}

/** Ask the kernel for the run's timeline (a "timeline" action; the answer is a "timeline" message). */
export function requestTimeline(model: TimelineModel, timeoutMs = 30000): Promise<TimelineJson> {
  return new Promise((resolve, reject) => {
    const answered = (msg: { kind?: string; timeline?: TimelineJson; error?: string }): void => {
      if (msg?.kind !== "timeline") return;
      window.clearTimeout(timer);
      model.off("msg:custom", answered);
      if (msg.timeline) resolve(msg.timeline);
      else reject(new Error(msg.error ?? "the kernel sent no timeline"));
    };
    const timer = window.setTimeout(() => {
      model.off("msg:custom", answered);
      reject(new Error("the kernel did not answer"));
    }, timeoutMs);
    model.on("msg:custom", answered);
    model.send({ kind: "action", action: "timeline" });
  });
}
