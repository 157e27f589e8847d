// What the DAG view computes from the wire data, as pure functions (no DOM): state names, legend
// counts, edge and dependency geometry, node labels and tooltips, durations and
// the rows of the attempts table. dagview.ts draws with them; test/model.test.ts checks them.

import type { AttemptJson, HaltedStepJson, InstancesJson, NodeView, ReusedFromJson, ShownName, StateName, WireLayout, WireNode } from "./types";

export const STATES: readonly StateName[] = [
  "pending",
  "ready",
  "running",
  "success",
  "failure",
  "denial",
  "cancellation",
  "skipped",
  "blocked",
];

/** The states a node does not leave within a run: they count as done. */
export const TERMINAL_STATES: readonly StateName[] = ["success", "failure", "denial", "cancellation", "skipped", "blocked"];

/**
 * The shown states that say more than the node state (rho_notebook.service.wire.shown_state), each
 * with the state the journal records for it: drawn and counted apart from that state.
 */
export const SHOWN_VARIANTS: Readonly<Record<Exclude<ShownName, StateName>, StateName>> = {
  waiting_for_approval: "running",
  failure_allowed: "failure",
  failure_handled: "failure",
  denial_handled: "denial",
};

/** Every shown state in legend order, each variant beside its state (wire.py SHOWN_ORDER). */
export const SHOWN_STATES: readonly ShownName[] = [
  "pending",
  "ready",
  "waiting_for_approval",
  "running",
  "success",
  "failure_allowed",
  "failure",
  "failure_handled",
  "denial",
  "denial_handled",
  "cancellation",
  "skipped",
  "blocked",
];

/** How a person reads a shown state: "failure (allowed)", "waiting for approval"; a state as itself. */
export const SHOWN_LABEL: Readonly<Record<ShownName, string>> = {
  ...(Object.fromEntries(STATES.map((s) => [s, s])) as Record<StateName, string>),
  waiting_for_approval: "waiting for approval",
  failure_allowed: "failure (allowed)",
  failure_handled: "failure (handled)",
  denial_handled: "denial (handled)",
};

const KNOWN = new Set<string>(STATES);
const KNOWN_SHOWN = new Set<string>(SHOWN_STATES);

/** The state to draw for a wire state string: itself when the view knows it, else "pending". */
export function stateOf(state: string | null | undefined): StateName {
  return state && KNOWN.has(state) ? (state as StateName) : "pending";
}

/** What to draw and count a node as: its view's `shown` when the view knows it, else its state. */
export function shownOf(view: Pick<NodeView, "state" | "shown"> | null | undefined): ShownName {
  const shown = view?.shown;
  return shown && KNOWN_SHOWN.has(shown) ? shown : stateOf(view?.state);
}

/** The node state a shown state stands for (a variant's state; a state itself). */
export function baseState(shown: ShownName): StateName {
  return (SHOWN_VARIANTS as Record<string, StateName>)[shown] ?? (shown as StateName);
}

/** Whether a node shown so is done (no longer waits or runs): its state is terminal. */
export function shownDone(shown: ShownName): boolean {
  return shown !== "waiting_for_approval" && TERMINAL_STATES.includes(baseState(shown));
}

/**
 * How many of `names` are in each shown state (a node without a view is pending; an allowed
 * failure is not a failure, a held launch is not running), and how many are done.
 */
export function countStates(
  names: Iterable<string>,
  views: Record<string, NodeView | undefined>,
): { counts: Map<ShownName, number>; done: number; total: number } {
  const counts = new Map<ShownName, number>(SHOWN_STATES.map((s) => [s, 0]));
  let total = 0;
  let done = 0;
  for (const name of names) {
    const shown = shownOf(views[name]);
    counts.set(shown, (counts.get(shown) ?? 0) + 1);
    total += 1;
    if (shownDone(shown)) done += 1;
  }
  return { counts, done, total };
}

/** An SVG path through `points`: cubic segments bending along the layout's direction. */
export function curve(points: number[][], direction: string): string {
  let d = `M${points[0][0]},${points[0][1]}`;
  for (let i = 1; i < points.length; i++) {
    const [px, py] = points[i - 1];
    const [x, y] = points[i];
    if (direction === "TB") {
      const mid = (py + y) / 2;
      d += `C${px},${mid} ${x},${mid} ${x},${y}`;
    } else {
      const mid = (px + x) / 2;
      d += `C${mid},${py} ${mid},${y} ${x},${y}`;
    }
  }
  return d;
}

/**
 * The two ends of the highlight drawn from a dependency to the node that needs it: from the
 * middle of the dependency's bottom (TB) or right (LR) side to the middle of the node's top or left.
 */
export function dependencyEnds(from: WireNode, to: WireNode, layout: WireLayout): [number[], number[]] {
  const { node_width: w, node_height: nh } = layout;
  if (layout.direction === "TB") return [[from.x + w / 2, from.y + nh], [to.x + w / 2, to.y]];
  return [[from.x + w, from.y + nh / 2], [to.x, to.y + nh / 2]];
}

/** How many characters of a label fit in a node `nodeWidth` wide (icon left, 7 px a character). */
export function labelChars(nodeWidth: number): number {
  return Math.floor((nodeWidth - 34) / 7);
}

/** The node's name as drawn: cut with an ellipsis when longer than `maxChars`. */
export function nodeLabel(name: string, maxChars: number): string {
  return name.length <= maxChars ? name : name.slice(0, maxChars - 1) + "\u2026";
}

/** `reused from run R (node N, attempt A)`: where a reused attempt's success came from. */
export function reusedText(source: ReusedFromJson): string {
  return `reused from run ${source.run_id} (node ${source.node}, attempt ${source.attempt})`;
}

/** `approval carried from run R by P` for a launch approved in an earlier run; else "". */
export function carriedText(approval: Record<string, unknown> | null | undefined): string {
  if (!approval || approval.via !== "carried") return "";
  const comment = typeof approval.comment === "string" && approval.comment ? approval.comment : "carried";
  const by = typeof approval.by === "string" && approval.by ? approval.by : "unknown";
  return `approval ${comment} by ${by}`;
}

/**
 * The legend entry of a script run's halted steps (lifecycle needs_decision): not a node state (a
 * halted step keeps its state) but a mark of its own: [fill, stroke, icon].
 */
export const DECISION_STYLE: [string, string, string] = ["var(--rho-state-decision-bg)", "var(--rho-state-decision)", "?"];
export const DECISION_LABEL = "needs decision";

/** How many of `names` a script run stopped at (their views carry `halted`). */
export function countHalted(names: Iterable<string>, views: Record<string, NodeView | undefined>): number {
  let count = 0;
  for (const name of names) if (views[name]?.halted) count += 1;
  return count;
}

/**
 * The mark drawn in a node's corner: "? needs decision" for a step the run stopped at, "\u21ba
 * replayed" for a script step answered from the journal (nothing ran), "\u21ba reused" for a
 * reused graph node; "" otherwise. The first that applies wins.
 */
export function nodeMark(view: NodeView | undefined): { text: string; kind: "" | "halted" | "replayed" | "reused" | "instances" } {
  if (view?.halted) return { text: `${DECISION_STYLE[2]} ${DECISION_LABEL}`, kind: "halted" };
  if (view?.replayed) return { text: "\u21ba replayed", kind: "replayed" };
  if (view?.reused_from) return { text: "\u21ba reused", kind: "reused" };
  if (view?.instances) return { text: instancesMark(view.instances), kind: "instances" };
  return { text: "", kind: "" };
}

/** An aggregate step's instances on its node: `3/4 ×` (settled of all), `4 ×` when all settled. */
export function instancesMark(instances: InstancesJson): string {
  const total = Object.keys(instances.states).length;
  const open = Object.values(instances.states).filter((s) => s === "running" || s === "pending").length;
  return open ? `${total - open}/${total} \u00d7` : `${total} \u00d7`;
}

/** `instances: 3 success, 1 running` (counts in the order the run has them). */
export function instancesText(instances: InstancesJson): string {
  const parts = Object.entries(instances.counts)
    .filter(([, n]) => n > 0)
    .map(([state, n]) => `${n} ${state}`);
  return `instances: ${parts.join(", ") || "none yet"}`;
}

/** `needs a decision: a (why); b (why) — NEXT`, where NEXT is the run view's `next` (the server's
 * words: `--raise-budget` for a run its budget halted), else `rho-notebook resume RUN --decide a=rerun|skip ...`. */
export function decisionText(runId: string, halted: readonly HaltedStepJson[] | undefined, next?: string): string {
  if (!halted || !halted.length) return "";
  const steps = halted.map((h) => `${h.step} (${h.why})`).join("; ");
  const decide = halted.map((h) => `--decide ${h.step}=rerun|skip`).join(" ");
  return `needs a decision: ${steps} \u2014 ${next ?? `rho-notebook resume ${runId} ${decide}`}`;
}

/** A run's emitted output on one line, cut with an ellipsis past `maxChars`. */
export function outputText(value: unknown, maxChars = 200): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= maxChars ? text : text.slice(0, maxChars - 1) + "\u2026";
}

/** The tooltip of a node: name, kind, state, attempt, where a reused result came from, replays, and reason. */
export function nodeTitle(node: WireNode, view: NodeView | undefined): string {
  const state = SHOWN_LABEL[shownOf(view)];
  const attempt = view?.attempt ? `, attempt ${view.attempt}` : "";
  const source = view?.reused_from;
  // the runner's reason may name the source run already: then it is said once
  const reused = source && !(view?.reason ?? "").includes(source.run_id) ? `\n${reusedText(source)}` : "";
  const replayed = view?.replayed ? `\nreplayed ${view.replayed}\u00d7 from the journal: nothing ran` : "";
  const halted = view?.halted ? `\n${DECISION_LABEL}: ${view.halted}` : "";
  const instances = view?.instances ? `\n${instancesText(view.instances)}` : "";
  const reason = view?.reason ? ` \u2014 ${view.reason}` : "";
  return `${node.name} (${node.kind}): ${state}${attempt}${reason}${reused}${replayed}${halted}${instances}`;
}

/** need -> the nodes that need it, in layout order. */
export function childrenOf(layout: WireLayout): Map<string, string[]> {
  const children = new Map<string, string[]>();
  for (const node of layout.nodes) {
    for (const need of node.needs) {
      const list = children.get(need);
      if (list) list.push(node.name);
      else children.set(need, [node.name]);
    }
  }
  return children;
}

export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return "–";
  const total = Math.floor(ms / 1000);
  const hours = Math.floor(total / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const seconds = total % 60;
  const pad = (n: number) => String(n).padStart(2, "0");
  if (hours > 0) return `${hours}:${pad(minutes)}:${pad(seconds)}`;
  if (total < 60) return `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
  return `${minutes}:${pad(seconds)}`;
}

/** Milliseconds from `start` to `end`, or to now on the kernel's clock (`offset`) while running. */
export function elapsed(start?: string | null, end?: string | null, offset = 0, now = Date.now()): number {
  if (!start) return NaN;
  const from = Date.parse(start);
  const to = end ? Date.parse(end) : now + offset;
  return to - from;
}

/** The cells of one row of the attempts table: #, state, started, duration, exit, message. */
export function attemptCells(a: AttemptJson): [string, string, string, string, string, string] {
  const exit = a.exit;
  const code = exit?.code;
  const exitText = exit ? `${exit.kind ?? ""}${code !== null && code !== undefined ? ` ${code}` : ""}${exit.signal ? ` sig ${exit.signal}` : ""}` : "";
  const state = (a.state ?? (a.uncertain ? "uncertain" : "running")) + (a.abandoned ? " (abandoned)" : "");
  const started = a.started_at ? a.started_at.replace("T", " ").slice(0, 23) : "";
  const duration = a.started_at && a.ended_at ? formatDuration(Date.parse(a.ended_at) - Date.parse(a.started_at)) : "\u2026";
  return [String(a.number), state, started, duration, exitText, a.message ?? ""];
}

// -- scale: zoom, fit, pan ------------------------------------------------------------------------

/** The zoom range of the view (1 = one layout unit a CSS pixel). */
export const ZOOM_MIN = 0.1;
export const ZOOM_MAX = 4;
/** The font size of node labels in layout units (dagview.css), and the smallest size drawn by default. */
export const LABEL_PX = 12;
export const READABLE_PX = 11;
/** One click of + or −. */
export const ZOOM_STEP = 1.25;
/** From this width of the view on, the node pane sits beside the graph; below it otherwise. */
export const PANE_SIDE_MIN_WIDTH = 900;

export interface Size {
  width: number;
  height: number;
}

export function clampZoom(zoom: number, min = ZOOM_MIN, max = ZOOM_MAX): number {
  if (!Number.isFinite(zoom)) return 1;
  return Math.min(max, Math.max(min, zoom));
}

/** The smallest zoom at which labels of `labelPx` layout units are drawn at least `minPx` CSS pixels. */
export function readableZoom(labelPx = LABEL_PX, minPx = READABLE_PX): number {
  return minPx / labelPx;
}

/** The zoom that shows all of `content` in `view` (less `pad` pixels each way). */
export function fitZoom(content: Size, view: Size, pad = 8): number {
  const w = Math.max(1, content.width);
  const h = Math.max(1, content.height);
  const byWidth = view.width > pad ? (view.width - pad) / w : Infinity;
  const byHeight = view.height > pad ? (view.height - pad) / h : Infinity;
  const fit = Math.min(byWidth, byHeight);
  return clampZoom(Number.isFinite(fit) ? fit : 1);
}

/**
 * The zoom a view starts at: the whole graph when it fits at up to 1:1, never smaller than the
 * readable zoom (a larger graph is then panned, not shrunk until its labels cannot be read).
 */
export function initialZoom(content: Size, view: Size, readable = readableZoom()): number {
  return clampZoom(Math.max(readable, Math.min(1, fitZoom(content, view))));
}

/** `zoom` one step in (`steps` > 0) or out (< 0). */
export function stepZoom(zoom: number, steps: number): number {
  return clampZoom(zoom * ZOOM_STEP ** steps);
}

/** The zoom factor of one wheel event (deltaMode 1 counts lines, 2 pages). */
export function wheelFactor(deltaY: number, deltaMode = 0): number {
  const pixels = deltaY * (deltaMode === 1 ? 16 : deltaMode === 2 ? 400 : 1);
  return Math.exp(-Math.max(-300, Math.min(300, pixels)) * 0.002);
}

/**
 * The scroll offset that keeps the content point under `pointer` (relative to the viewport's
 * corner) under it when the zoom goes from `from` to `to`; one axis.
 */
export function zoomScroll(from: number, to: number, pointer: number, scroll: number): number {
  return Math.max(0, ((scroll + pointer) * to) / from - pointer);
}

/** Where the node pane goes in a view `width` CSS pixels wide. */
export function panePlacement(width: number, sideMin = PANE_SIDE_MIN_WIDTH): "side" | "below" {
  return width >= sideMin ? "side" : "below";
}
