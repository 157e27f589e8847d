// The DAG view: one framework-free module. `renderDag(el, source)` draws a laid-out DAG (the
// layout comes from Python), colours and marks nodes by state, shows a legend with counts, the
// elapsed time, Cancel / Resume, and an output pane for the selected node. The anywidget entry
// (widget.ts) and the JupyterLab sidebar both call it with their own DagSource.

import DOMPurify from "dompurify";
import { marked } from "marked";

import {
  attemptCells,
  carriedText,
  childrenOf,
  clampZoom,
  countHalted,
  countStates,
  curve,
  DECISION_LABEL,
  DECISION_STYLE,
  decisionText,
  dependencyEnds,
  elapsed,
  fitZoom,
  formatDuration,
  initialZoom,
  labelChars,
  nodeLabel,
  nodeMark,
  nodeTitle,
  outputText,
  panePlacement,
  reusedText,
  SHOWN_LABEL,
  SHOWN_STATES,
  SHOWN_VARIANTS,
  shownOf,
  stateOf,
  stepZoom,
  wheelFactor,
  zoomScroll,
} from "./model";
import { ForkForms } from "./forkform";
import { mountTimeline } from "./timeline";
import { spendText } from "./usage";
import type {
  AttemptJson,
  Change,
  DagSource,
  Detail,
  FormField,
  FormRequestView,
  ShownName,
  StreamView,
  WireLayout,
  WireNode,
} from "./types";

export type { DagSource, Change } from "./types";
export { STATES, SHOWN_STATES, SHOWN_LABEL, shownOf, formatDuration, DECISION_STYLE } from "./model";

/** The [fill, stroke] of a shown state: the theme-following custom properties of dagview.css. */
function stateColours(shown: ShownName): [string, string] {
  return [`var(--rho-state-${shown}-bg)`, `var(--rho-state-${shown})`];
}

/**
 * shown state -> [fill, stroke, icon]: the colours are dagview.css's custom properties (theme
 * variables with fallbacks); the icons are rho_notebook/views/svg.py's (the static picture).
 */
export const STATE_STYLE: Record<ShownName, [string, string, string]> = {
  pending: [...stateColours("pending"), "\u25cb"],
  ready: [...stateColours("ready"), "\u25d4"],
  running: [...stateColours("running"), "\u25c9"],
  success: [...stateColours("success"), "\u2713"],
  failure: [...stateColours("failure"), "\u2717"],
  denial: [...stateColours("denial"), "\u2298"],
  cancellation: [...stateColours("cancellation"), "\u25a0"],
  skipped: [...stateColours("skipped"), "\u21b7"],
  blocked: [...stateColours("blocked"), "\u2297"],
  waiting_for_approval: [...stateColours("waiting_for_approval"), "\u25f7"],
  failure_allowed: [...stateColours("failure_allowed"), "\u2717"],
  failure_handled: [...stateColours("failure_handled"), "\u2717"],
  denial_handled: [...stateColours("denial_handled"), "\u2298"],
};

const SVG_NS = "http://www.w3.org/2000/svg";
const PANE_CHARS = 64 * 1024;

function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string);
}

/** An element with attributes (``class`` sets className) and children; null, undefined and false
 * children are left out. The sidebar builds its parts with it too. */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string> = {},
  ...children: (Node | string | null | undefined | false)[]
): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child);
  }
  return node;
}

/** Markdown to sanitized HTML (agent answers are untrusted text). */
export function markdownHtml(text: string): string {
  const html = marked.parse(text, { async: false, gfm: true }) as string;
  return DOMPurify.sanitize(html);
}

/** A collapsible tree of a JSON value. */
export function jsonTree(value: unknown, key?: string, depth = 0): HTMLElement {
  const label = key === undefined ? "" : `${key}: `;
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value)
      ? value.map((v, i) => [String(i), v] as [string, unknown])
      : Object.entries(value as Record<string, unknown>);
    const summary = Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`;
    const details = h("details", { class: "rho-json" }, h("summary", {}, h("span", { class: "rho-json-key" }, label), summary));
    if (depth < 2) details.open = true;
    const list = h("div", { class: "rho-json-children" });
    for (const [k, v] of entries) list.append(jsonTree(v, k, depth + 1));
    details.append(list);
    return details;
  }
  const kind = value === null ? "null" : typeof value;
  return h(
    "div",
    { class: "rho-json-leaf" },
    h("span", { class: "rho-json-key" }, label),
    h("span", { class: `rho-json-${kind}` }, JSON.stringify(value)),
  );
}

/** The input of one form field: text, number (integer), checkbox (bool) or select (enum). */
function fieldInput(name: string, field: FormField, value: unknown): HTMLElement {
  const attrs: Record<string, string> = { name, "data-type": field.type, class: "rho-field-input" };
  if (field.type === "bool") {
    const box = h("input", { ...attrs, type: "checkbox" });
    box.checked = value === true;
    return box;
  }
  if (field.type === "enum") {
    const select = h("select", attrs);
    const choices = field.choices ?? [];
    const chosen = choices.findIndex((choice) => JSON.stringify(choice) === JSON.stringify(value));
    if (chosen < 0) select.append(h("option", { value: "" }, "\u2014 choose \u2014"));
    choices.forEach((choice, i) => select.append(h("option", { value: String(i) }, typeof choice === "string" ? choice : JSON.stringify(choice))));
    select.value = chosen < 0 ? "" : String(chosen);
    return select;
  }
  const input = h("input", { ...attrs, type: field.type === "integer" ? "number" : "text" });
  if (field.type === "integer") input.step = "1";
  if (value !== undefined && value !== null) input.value = String(value);
  return input;
}

/**
 * The values of a rendered form (formCard): a checkbox is always a bool; an empty text, number or
 * select is left out (the kernel fills the default, or names a required field); a number that is
 * not an integer is sent as it is, so the kernel refuses it naming the field.
 */
export function formValues(form: HTMLElement, fields: Record<string, FormField>): Record<string, unknown> {
  const values: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(fields)) {
    const input = Array.from(form.querySelectorAll<HTMLInputElement | HTMLSelectElement>(".rho-field-input")).find((el) => el.name === name);
    if (!input) continue;
    if (field.type === "bool") {
      values[name] = (input as HTMLInputElement).checked;
    } else if (field.type === "enum") {
      if (input.value !== "") values[name] = (field.choices ?? [])[Number(input.value)];
    } else if (field.type === "integer") {
      if (input.value.trim() !== "") values[name] = Number.isFinite(Number(input.value)) ? Number(input.value) : input.value;
    } else if (input.value !== "" || (field.default !== undefined && field.default !== null)) {
      values[name] = input.value;
    }
  }
  return values;
}

export interface FormCardOptions {
  /** Called with the form's values on Submit; absent: the form is shown read-only. */
  submit?: (values: Record<string, unknown>) => void;
  /** Called on Decline (the step is denied). */
  decline?: () => void;
  /** Values to show instead of the defaults (what the person submitted last). */
  values?: Record<string, unknown>;
  /** The run, for the command line shown when the form is read-only. */
  runId?: string;
}

/**
 * A human step's pending form: its question, one labelled input per field (the default filled
 * in), the message of a refused answer, and Submit / Decline.
 */
export function formCard(request: FormRequestView, options: FormCardOptions = {}): HTMLFormElement {
  const form = h("form", { class: "rho-form", "data-request": request.request_id, "data-node": request.node });
  form.noValidate = true; // the kernel checks the values against the form and names a wrong field
  const head = h("div", { class: "rho-form-head" }, h("b", {}, "\u270b waiting for a person"), ` \u00b7 step ${request.step}`);
  if (request.node !== request.step) head.append(` (${request.node})`);
  form.append(head, h("div", { class: "rho-form-prompt" }, request.prompt));
  const fields = h("div", { class: "rho-form-fields" });
  for (const [name, field] of Object.entries(request.form)) {
    const value = options.values && name in options.values ? options.values[name] : field.default;
    const label = h("span", { class: "rho-field-label" }, field.label || name, field.required ? h("span", { class: "rho-required", title: "required" }, " *") : null);
    fields.append(h("label", { class: `rho-field rho-field-${field.type}`, "data-field": name }, label, fieldInput(name, field, value)));
  }
  form.append(fields);
  if (request.error) form.append(h("div", { class: "rho-form-error", role: "alert" }, request.error));
  const submit = h("button", { class: "rho-btn rho-submit", type: "submit" }, "Submit");
  const decline = h("button", { class: "rho-btn rho-decline", type: "button", title: "decline: the step ends in denial" }, "Decline");
  const actions = h("div", { class: "rho-form-actions" }, submit, decline);
  form.append(actions);
  const { submit: onSubmit, decline: onDecline } = options;
  if (!onSubmit) {
    submit.disabled = decline.disabled = true;
    actions.append(h("span", { class: "rho-note" }, `answer with: rho-notebook answer ${options.runId ?? "RUN"} ${request.node} FIELD=VALUE...`));
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!onSubmit || submit.disabled) return;
    submit.disabled = decline.disabled = true;
    onSubmit(formValues(form, request.form));
  });
  decline.addEventListener("click", () => {
    if (!onDecline || decline.disabled) return;
    submit.disabled = decline.disabled = true;
    onDecline();
  });
  return form;
}

/** Loop rounds of one step (`step@1`, `step@2`, ...) in a layout: step id -> node names. */
export function roundGroups(names: Iterable<string>): Map<string, string[]> {
  const groups = new Map<string, string[]>();
  for (const name of names) {
    const match = /^(.+)@(\d+)$/.exec(name);
    if (!match) continue;
    const step = match[1] as string;
    groups.set(step, [...(groups.get(step) ?? []), name]);
  }
  return groups;
}

export interface DagViewOptions {
  /**
   * When the wheel zooms the graph: "ctrl" (default) with Ctrl or ⌘ held (and trackpad pinch),
   * so a plain wheel still scrolls the notebook or sidebar; "always" for a view that has the
   * wheel to itself (the main-area tab).
   */
  wheelZoom?: "ctrl" | "always";
}

interface NodeElements {
  group: SVGGElement;
  icon: SVGTextElement;
  /** The corner mark: needs decision, replayed or reused (see nodeMark). */
  reused: SVGTextElement;
  title: SVGTitleElement;
  data: WireNode;
}

/**
 * Draw the DAG of `source` into `el`; returns a function that removes listeners and timers.
 *
 * The graph starts at the zoom that shows it whole, but never below the zoom at which labels are
 * 11 px; larger graphs are panned: drag the background, or scroll. The wheel zooms around the
 * pointer (see DagViewOptions.wheelZoom), − / fit / + zoom from the toolbar. The node pane goes
 * beside the graph when the view is at least PANE_SIDE_MIN_WIDTH wide, below it otherwise.
 */
export function renderDag(el: HTMLElement, source: DagSource, options: DagViewOptions = {}): () => void {
  const wheelAlways = options.wheelZoom === "always";
  const started = performance.now();
  el.classList.add("rho-dag");
  el.replaceChildren();

  const toolbar = h("div", { class: "rho-toolbar" });
  const titleEl = h("span", { class: "rho-title" });
  const badge = h("span", { class: "rho-badge" });
  const elapsedEl = h("span", { class: "rho-elapsed", title: "elapsed time of the run" });
  const spendEl = h("span", { class: "rho-elapsed rho-run-spend", title: "what the run's model calls spent (docs/usage.md)" });
  const cancelButton = h("button", { class: "rho-btn rho-cancel", type: "button", title: "request cancellation of this run" }, "\u25a0 Cancel");
  const resumeButton = h("button", { class: "rho-btn rho-resume", type: "button", title: "resume this run from its frozen graph" }, "\u21bb Resume");
  const zoomOut = h("button", { class: "rho-btn rho-zoom", type: "button", title: "zoom out" }, "\u2212");
  const zoomFit = h("button", { class: "rho-btn rho-zoom rho-zoom-fit", type: "button", title: "fit the whole graph into the view" }, "fit");
  const zoomIn = h("button", { class: "rho-btn rho-zoom rho-zoom-in", type: "button", title: "zoom in" }, "+");
  zoomOut.classList.add("rho-zoom-out");
  const zoomLevel = h("span", {
    class: "rho-zoom-level",
    title: wheelAlways ? "zoom: wheel over the graph; drag to pan" : "zoom: Ctrl/\u2318 + wheel over the graph; drag to pan",
  });
  const message = h("span", { class: "rho-message" });
  toolbar.append(titleEl, badge, elapsedEl, spendEl, cancelButton, resumeButton, message, h("span", { class: "rho-spacer" }), zoomOut, zoomLevel, zoomFit, zoomIn);

  const legend = h("div", { class: "rho-legend", title: "node states: count" });
  const legendCounts = new Map<ShownName, HTMLElement>();
  for (const state of SHOWN_STATES) {
    const [fill, stroke, icon] = STATE_STYLE[state];
    const count = h("b", {}, "0");
    legendCounts.set(state, count);
    // a state that says more (allowed failure, waiting for approval) is listed when a node has it
    const variant = state in SHOWN_VARIANTS;
    const attrs: Record<string, string> = { class: `rho-chip rho-chip-${state}${variant ? " rho-variant" : ""}`, "data-state": state };
    if (variant) attrs.hidden = "";
    const chip = h("span", attrs, h("i", {}, icon), ` ${SHOWN_LABEL[state]} `, count);
    chip.style.background = fill;
    chip.style.borderColor = stroke;
    legend.append(chip);
  }
  // a script run's halted steps: a mark of its own (they keep their state), counted apart
  const decisionCount = h("b", {}, "0");
  const decisionChip = h(
    "span",
    { class: "rho-chip rho-chip-needs_decision rho-zero", "data-mark": "needs_decision", title: "steps the run stopped at: the run's message says how it goes on" },
    h("i", {}, DECISION_STYLE[2]),
    ` ${DECISION_LABEL} `,
    decisionCount,
  );
  decisionChip.style.background = DECISION_STYLE[0];
  decisionChip.style.borderColor = DECISION_STYLE[1];
  legend.append(decisionChip);
  const edgeNote = h("span", { class: "rho-edge-note" });
  legend.append(edgeNote);
  const runOutput = h("div", { class: "rho-run-output", hidden: "" });
  const formsArea = h("div", { class: "rho-forms", hidden: "" });

  const viewport = h("div", { class: "rho-viewport" });
  const pane = h("div", { class: "rho-pane", hidden: "" });
  const forks = new ForkForms(source); // "fork from here" per node, kept across redraws of the pane
  const body = h("div", { class: "rho-body" }, viewport, pane);
  el.append(toolbar, legend, runOutput, formsArea, body);
  const unmountTimeline = mountTimeline(el, body, source); // the "DAG | Timeline" tabs of a run
  el.dataset.pane = "below";

  let layout: WireLayout = source.layout();
  let zoom = 1;
  /** Whether the zoom was set by the reader (then a resize keeps it). */
  let zoomChosen = false;
  let svg: SVGSVGElement = document.createElementNS(SVG_NS, "svg");
  let overlay: SVGGElement = document.createElementNS(SVG_NS, "g");
  const elements = new Map<string, NodeElements>();
  let children = new Map<string, string[]>();
  const shown = new Map<string, ShownName>();
  let highlighted: string[] = [];

  function drawGraph(): void {
    layout = source.layout();
    elements.clear();
    shown.clear();
    children = childrenOf(layout);
    const { node_width: w, node_height: nh, direction } = layout;
    const maxChars = labelChars(w);
    const parts: string[] = [];
    // loop rounds of one item-graph step share a dashed frame labelled with the step id (only
    // item nodes: a script's step ids may end in @N too, and those are not rounds)
    parts.push(`<g class="rho-rounds">`);
    const placed = new Map(layout.nodes.map((n) => [n.name, n]));
    for (const [step, names] of roundGroups(layout.nodes.filter((n) => n.kind === "item").map((n) => n.name))) {
      const boxes = names.map((name) => placed.get(name) as WireNode);
      const left = Math.min(...boxes.map((n) => n.x)) - 8;
      const top = Math.min(...boxes.map((n) => n.y)) - 16;
      const right = Math.max(...boxes.map((n) => n.x)) + w + 8;
      const bottom = Math.max(...boxes.map((n) => n.y)) + nh + 6;
      parts.push(
        `<g class="rho-round-group" data-step="${esc(step)}"><rect x="${left}" y="${top}" width="${right - left}" height="${bottom - top}" rx="8"/>` +
          `<text x="${left + 6}" y="${top + 11}">${esc(step)} \u00b7 ${names.length} round${names.length === 1 ? "" : "s"}</text></g>`,
      );
    }
    parts.push(`</g><g class="rho-edges">`);
    for (const edge of layout.edges) {
      const cls = edge.condition ? "rho-edge rho-edge-cond" : "rho-edge";
      parts.push(`<path class="${cls}" data-source="${esc(edge.source)}" data-target="${esc(edge.target)}" d="${curve(edge.points, direction)}"/>`);
    }
    parts.push(`</g><g class="rho-overlay"></g><g class="rho-nodes">`);
    for (const node of layout.nodes) {
      const name = esc(node.name);
      parts.push(
        `<g class="rho-node rho-s-pending" data-name="${name}" data-state="pending" transform="translate(${node.x},${node.y})">` +
          `<title>${name}</title><rect width="${w}" height="${nh}" rx="6"/>` +
          `<text class="rho-icon" x="10" y="${nh / 2 + 4}">${STATE_STYLE.pending[2]}</text>` +
          `<text class="rho-label" x="26" y="${nh / 2 + 4}">${esc(nodeLabel(node.name, maxChars))}</text>` +
          (node.conditional ? `<text class="rho-when" x="${w - 8}" y="11" text-anchor="end">when</text>` : "") +
          `<text class="rho-reused-mark" x="${w - 8}" y="${nh - 4}" text-anchor="end"></text>` +
          `</g>`,
      );
    }
    parts.push(`</g>`);
    svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("class", "rho-graph");
    svg.setAttribute("viewBox", `0 0 ${layout.width} ${layout.height}`);
    svg.innerHTML = parts.join("");
    overlay = svg.querySelector("g.rho-overlay") as SVGGElement;
    const byName = new Map(layout.nodes.map((n) => [n.name, n]));
    for (const group of Array.from(svg.querySelectorAll<SVGGElement>("g.rho-node"))) {
      const name = group.dataset.name as string;
      elements.set(name, {
        group,
        icon: group.querySelector("text.rho-icon") as SVGTextElement,
        reused: group.querySelector("text.rho-reused-mark") as SVGTextElement,
        title: group.querySelector("title") as unknown as SVGTitleElement,
        data: byName.get(name) as WireNode,
      });
    }
    const { scrollLeft, scrollTop } = viewport;
    viewport.replaceChildren(svg);
    viewport.scrollLeft = scrollLeft;
    viewport.scrollTop = scrollTop;
    edgeNote.textContent = source.run().script
      ? `${layout.nodes.length} steps in arrival order \u00b7 edges: step results passed to later steps`
      : `${layout.nodes.length} nodes \u00b7 ${layout.reduced_edge_count} of ${layout.edge_count} edges drawn (transitive reduction) \u00b7 dashed: condition`;
    applyZoom();
    autoZoom();
    updateNodes("all");
  }

  function applyZoom(): void {
    svg.setAttribute("width", String(Math.max(1, layout.width * zoom)));
    svg.setAttribute("height", String(Math.max(1, layout.height * zoom)));
    zoomLevel.textContent = `${Math.round(zoom * 100)}%`;
    el.dataset.zoom = zoom.toFixed(3);
  }

  function viewSize(): { width: number; height: number } {
    // a viewport without a height of its own (the notebook's) may grow up to its max-height
    const max = parseFloat(getComputedStyle(viewport).maxHeight);
    const height = Number.isFinite(max) && max > 0 ? Math.max(viewport.clientHeight, max) : viewport.clientHeight;
    return { width: viewport.clientWidth, height };
  }

  /** Zoom to `next`, keeping the graph point under (px, py) (viewport pixels) in place. */
  function setZoom(next: number, px?: number, py?: number): void {
    next = clampZoom(next);
    if (next === zoom) return;
    const x = px ?? viewport.clientWidth / 2;
    const y = py ?? viewport.clientHeight / 2;
    const left = zoomScroll(zoom, next, x, viewport.scrollLeft);
    const top = zoomScroll(zoom, next, y, viewport.scrollTop);
    zoom = next;
    applyZoom();
    viewport.scrollLeft = left;
    viewport.scrollTop = top;
  }

  function fitAll(): void {
    zoomChosen = true;
    setZoom(fitZoom({ width: layout.width, height: layout.height }, viewSize()));
  }

  /** The starting zoom, for the view's current size (until the reader zooms). */
  function autoZoom(): void {
    if (zoomChosen) return;
    const size = viewSize();
    if (!size.width) return;
    zoom = initialZoom({ width: layout.width, height: layout.height }, size);
    applyZoom();
  }

  function placePane(): void {
    const width = el.clientWidth;
    if (!width) return;
    const place = panePlacement(width);
    if (el.dataset.pane !== place) el.dataset.pane = place;
  }

  function updateNodes(which: string[] | "all"): void {
    const views = source.nodes();
    const names = which === "all" ? Array.from(elements.keys()) : which;
    for (const name of names) {
      const found = elements.get(name);
      if (!found) continue;
      const view = views[name];
      const state = shownOf(view);
      if (shown.get(name) !== state) {
        shown.set(name, state);
        found.group.setAttribute("class", `rho-node rho-s-${state}` + (name === source.selected() ? " rho-sel" : "") + (highlighted.includes(name) ? " rho-need" : ""));
        found.group.dataset.state = state;
        found.icon.textContent = STATE_STYLE[state][2];
      }
      // a reused node (nothing launched: a stored success of the same reuse key) and a replayed
      // script step (answered from the journal) keep their state colour and get a mark; so does
      // a step the run stopped at (needs decision); the tooltip and the pane say more
      const mark = nodeMark(view);
      found.group.classList.toggle("rho-reused", mark.kind === "reused");
      found.group.classList.toggle("rho-replayed", mark.kind === "replayed");
      found.group.classList.toggle("rho-halted", mark.kind === "halted");
      found.reused.textContent = mark.text;
      found.title.textContent = nodeTitle(found.data, view);
    }
    markAsking();
    updateCounts();
  }

  /** Nodes whose human step waits for a form answer get a mark of their own. */
  function markAsking(): void {
    const asking = new Set((source.forms?.() ?? []).map((form) => form.node));
    for (const [name, found] of elements) found.group.classList.toggle("rho-asking", asking.has(name));
  }

  /** What the person submitted last per request, kept when a refused form is drawn again. */
  const submitted = new Map<string, Record<string, unknown>>();

  function renderForms(): void {
    const forms = source.forms?.() ?? [];
    formsArea.hidden = forms.length === 0;
    const answer = source.answer?.bind(source);
    const runId = source.run().run_id ?? undefined;
    formsArea.replaceChildren(
      ...forms.map((request) =>
        formCard(request, {
          values: submitted.get(request.request_id),
          runId,
          submit: answer
            ? (values) => {
                submitted.set(request.request_id, values);
                answer(request.request_id, values);
              }
            : undefined,
          decline: answer ? () => answer(request.request_id, null) : undefined,
        }),
      ),
    );
    markAsking();
  }

  function updateCounts(): void {
    const { counts, done, total } = countStates(elements.keys(), source.nodes());
    for (const [state, count] of counts) {
      const target = legendCounts.get(state);
      if (target) {
        target.textContent = String(count);
        const chip = target.parentElement as HTMLElement;
        chip.classList.toggle("rho-zero", count === 0);
        if (state in SHOWN_VARIANTS) chip.hidden = count === 0;
      }
    }
    el.dataset.done = String(done);
    el.dataset.total = String(total);
    const halted = countHalted(elements.keys(), source.nodes());
    decisionCount.textContent = String(halted);
    decisionChip.classList.toggle("rho-zero", halted === 0);
    el.dataset.halted = String(halted);
  }

  function updateRun(): void {
    const run = source.run();
    const mode = source.mode();
    titleEl.textContent = source.title();
    el.dataset.mode = mode;
    if (mode === "plan" || !run.lifecycle) {
      badge.textContent = "plan";
      badge.className = "rho-badge rho-badge-plan";
      cancelButton.hidden = resumeButton.hidden = true;
      elapsedEl.textContent = "";
      message.textContent = "";
      runOutput.hidden = true;
      el.dataset.lifecycle = "plan";
      return;
    }
    const outcome = run.outcome ? ` \u00b7 ${run.outcome}` : "";
    badge.textContent = `${run.lifecycle}${outcome}`;
    badge.title = `run ${run.run_id ?? ""} of plan ${run.plan_id ?? ""}\ngraph digest ${run.graph_digest ?? ""}`;
    badge.className = `rho-badge rho-badge-${run.lifecycle} rho-outcome-${run.outcome ?? "none"}`;
    el.dataset.lifecycle = run.lifecycle;
    el.dataset.outcome = run.outcome ?? "";
    cancelButton.hidden = !run.can_cancel;
    cancelButton.disabled = Boolean(run.cancel_pending);
    resumeButton.hidden = !run.can_resume;
    const digest = run.graph_digest ?? "";
    resumeButton.textContent = `\u21bb Resume \u2014 confirm ${digest.slice(0, 19)}\u2026`;
    resumeButton.title = `resume this run from its frozen graph, confirming graph digest ${digest}`;
    message.textContent = run.message ?? (run.lifecycle === "needs_decision" ? decisionText(run.run_id ?? "", run.halted, run.next) : "");
    const hasOutput = run.output !== undefined;
    runOutput.hidden = !hasOutput;
    runOutput.replaceChildren(...(hasOutput ? [h("b", {}, "output "), h("code", { title: JSON.stringify(run.output) ?? "" }, outputText(run.output))] : []));
    const spent = run.usage;
    spendEl.textContent = spent ? `\u03a3 ${spendText(spent)}` : "";
    tick();
  }

  function tick(): void {
    const run = source.run();
    if (source.mode() === "run" && run.started_at) {
      elapsedEl.textContent = `elapsed ${formatDuration(elapsed(run.started_at, run.ended_at, source.clockOffset()))}`;
    }
    const detail = source.detail();
    if (detail.live && detail.node) {
      const view = source.nodes()[detail.node];
      const target = pane.querySelector(".rho-pane-elapsed");
      if (target && view?.started_at) target.textContent = formatDuration(elapsed(view.started_at, view.ended_at, source.clockOffset()));
    }
  }

  // -- selection ----------------------------------------------------------------------------------

  function highlight(): void {
    const selected = source.selected();
    for (const name of highlighted) elements.get(name)?.group.classList.remove("rho-need", "rho-child");
    for (const found of svg.querySelectorAll(".rho-sel")) found.classList.remove("rho-sel");
    overlay.replaceChildren();
    highlighted = [];
    svg.classList.toggle("rho-has-sel", Boolean(selected));
    const target = elements.get(selected);
    if (!target) return;
    target.group.classList.add("rho-sel");
    const parts: string[] = [];
    for (const need of target.data.needs) {
      const from = elements.get(need);
      if (!from) continue;
      from.group.classList.add("rho-need");
      highlighted.push(need);
      const cls = target.data.conditional ? "rho-dep rho-edge-cond" : "rho-dep";
      parts.push(`<path class="${cls}" d="${curve(dependencyEnds(from.data, target.data, layout), layout.direction)}"/>`);
    }
    for (const child of children.get(selected) ?? []) {
      elements.get(child)?.group.classList.add("rho-child");
      highlighted.push(child);
    }
    overlay.innerHTML = parts.join("");
  }

  function streamBlock(label: string, stream: StreamView | null | undefined, cls: string): HTMLElement | null {
    if (!stream) return null;
    const notes: HTMLElement[] = [];
    if (stream.start > 0) notes.push(h("div", { class: "rho-note" }, `\u2026 the first ${stream.start} bytes are not shown (the pane keeps the last 64 KiB)`));
    const pre = h("pre", { class: `rho-stream rho-${cls}` }, stream.text || "(empty)");
    const after: HTMLElement[] = [];
    if (stream.truncated) {
      after.push(h("div", { class: "rho-note rho-truncated" }, `\u2702 output truncated: the runner kept ${stream.limit} bytes (max_output_bytes) and dropped the rest`));
    }
    const section = h("details", { class: `rho-section rho-section-${cls}`, open: "" }, h("summary", {}, `${label} \u00b7 ${stream.bytes} bytes`), ...notes, pre, ...after);
    return section;
  }

  function attemptsTable(attempts: AttemptJson[]): HTMLElement {
    const table = h("table", { class: "rho-attempts" });
    table.append(h("tr", {}, h("th", {}, "#"), h("th", {}, "state"), h("th", {}, "started"), h("th", {}, "duration"), h("th", {}, "exit"), h("th", {}, "message")));
    for (const a of attempts) table.append(h("tr", {}, ...attemptCells(a).map((cell) => h("td", {}, cell))));
    // a narrow pane scrolls the table sideways instead of squeezing or cutting columns
    return h("div", { class: "rho-table-scroll" }, table);
  }

  function definitionBlock(definition: Record<string, unknown>): HTMLElement {
    const list = h("dl", { class: "rho-definition" });
    for (const [key, value] of Object.entries(definition)) {
      if (key === "kind") continue;
      if (value !== null && typeof value === "object" && !Array.isArray(value)) {
        list.append(h("dt", {}, key), h("dd", {}, jsonTree(value)));
        continue;
      }
      const text = Array.isArray(value) ? (key === "argv" || key === "arguments" ? JSON.stringify(value) : value.join(", ") || "(none)") : String(value);
      list.append(h("dt", {}, key), h("dd", {}, key === "prompt" || key === "command" ? h("pre", {}, text) : text));
    }
    return list;
  }

  function renderPane(): void {
    const selected = source.selected();
    const detail: Detail = source.detail();
    pane.hidden = !selected;
    el.classList.toggle("rho-with-pane", Boolean(selected));
    if (!selected) {
      pane.replaceChildren();
      return;
    }
    const close = h("button", { class: "rho-btn rho-close", type: "button", title: "close (Esc)" }, "\u00d7");
    close.addEventListener("click", () => source.select(""));
    if (detail.node !== selected) {
      pane.replaceChildren(h("div", { class: "rho-pane-head" }, h("b", {}, selected), close), h("div", { class: "rho-note" }, "loading\u2026"));
      return;
    }
    const view = source.nodes()[selected];
    const state = view ? shownOf(view) : stateOf(detail.state);
    const [fill, stroke, icon] = STATE_STYLE[state];
    const stateChip = h("span", { class: "rho-chip", "data-state": state }, `${icon} ${SHOWN_LABEL[state]}`);
    stateChip.style.background = fill;
    stateChip.style.borderColor = stroke;
    const head = h(
      "div",
      { class: "rho-pane-head" },
      h("b", { class: "rho-pane-name" }, selected),
      h("span", { class: "rho-kind" }, detail.kind ?? ""),
      stateChip,
      detail.attempt ? h("span", {}, `attempt ${detail.attempt}`) : null,
      view?.started_at ? h("span", { class: "rho-pane-elapsed" }, formatDuration(elapsed(view.started_at, view.ended_at, source.clockOffset()))) : null,
      detail.live ? h("span", { class: "rho-live" }, "\u25cf live") : null,
      close,
    );
    const blocks: (HTMLElement | null)[] = [head];
    if (detail.reason || view?.reason) blocks.push(h("div", { class: "rho-reason" }, detail.reason || view?.reason || ""));
    const reusedFrom = detail.reused_from ?? view?.reused_from;
    const reasonText = detail.reason || view?.reason || "";
    // the runner's reason may name the source run already; then the reason is the one line
    if (reusedFrom && !reasonText.includes(reusedFrom.run_id)) blocks.push(h("div", { class: "rho-provenance rho-reused-from" }, `\u21ba ${reusedText(reusedFrom)}: nothing was launched in this run`));
    const haltedWhy = detail.halted ?? view?.halted;
    if (haltedWhy) {
      const run = source.run();
      blocks.push(
        h(
          "div",
          { class: "rho-provenance rho-halted-why" },
          `${DECISION_STYLE[2]} ${DECISION_LABEL}: ${haltedWhy} \u2014 rho-notebook resume ${run.run_id ?? "RUN"} --decide ${selected}=rerun|skip`,
        ),
      );
    }
    const replayed = detail.replayed ?? view?.replayed;
    if (replayed) blocks.push(h("div", { class: "rho-provenance rho-replayed-note" }, `\u21ba replayed ${replayed}\u00d7 from the journal: nothing ran for those calls`));
    const carried = carriedText(detail.approval);
    if (carried) blocks.push(h("div", { class: "rho-provenance rho-carried" }, `\u2713 ${carried}`));
    if (detail.spend) blocks.push(h("div", { class: "rho-provenance rho-spend", title: "what its model calls spent, every attempt (docs/usage.md)" }, `\u03a3 ${spendText(detail.spend)}`));
    if (detail.answer) {
      const answer = h("div", { class: "rho-markdown" });
      answer.innerHTML = markdownHtml(detail.answer.text);
      blocks.push(h("details", { class: "rho-section rho-section-answer", open: "" }, h("summary", {}, "answer"), answer));
    }
    blocks.push(streamBlock("raw answer", detail.raw_answer, "raw-answer"));
    blocks.push(streamBlock("stdout", detail.stdout, "stdout"));
    blocks.push(streamBlock("stderr", detail.stderr, "stderr"));
    const item = detail.kind === "item";
    if (item && detail.has_input) {
      blocks.push(h("details", { class: "rho-section rho-section-input", open: "" }, h("summary", {}, "input item"), jsonTree(detail.input)));
    }
    if (detail.has_value) {
      const label = item ? "output item" : detail.step ? "step result (output, value)" : "validated value";
      blocks.push(h("details", { class: "rho-section rho-section-value", open: "" }, h("summary", {}, label), jsonTree(detail.value)));
    }
    blocks.push(forks.section(detail));
    if (detail.usage !== null && detail.usage !== undefined) {
      blocks.push(h("details", { class: "rho-section rho-section-usage" }, h("summary", {}, "usage"), jsonTree(detail.usage)));
    }
    if (detail.attempts && detail.attempts.length) {
      // wire.py declares Detail.attempts as list[dict]; the pane's builder fills it with AttemptJson rows
      const attempts = detail.attempts as unknown as AttemptJson[];
      blocks.push(h("details", { class: "rho-section rho-section-attempts", open: "" }, h("summary", {}, `attempts (${attempts.length})`), attemptsTable(attempts)));
    }
    if (detail.definition) {
      blocks.push(h("details", { class: "rho-section rho-section-definition" }, h("summary", {}, "definition"), definitionBlock(detail.definition)));
    }
    pane.replaceChildren(...blocks.filter((b): b is HTMLElement => b !== null));
  }

  function appendOutput(change: Change): void {
    const detail = source.detail();
    for (const chunk of change.output ?? []) {
      if (chunk.node !== detail.node) continue;
      const pre = pane.querySelector<HTMLPreElement>(`pre.rho-${chunk.stream}`);
      if (!pre) {
        renderPane();
        return;
      }
      const follow = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      const text = (pre.textContent === "(empty)" ? "" : pre.textContent ?? "") + chunk.text;
      pre.textContent = text.length > PANE_CHARS ? text.slice(text.length - PANE_CHARS) : text;
      if (follow) pre.scrollTop = pre.scrollHeight;
    }
  }

  // -- events -------------------------------------------------------------------------------------

  function onClick(event: MouseEvent): void {
    const group = (event.target as Element).closest?.("g.rho-node") as SVGGElement | null;
    if (!group) return;
    const name = group.dataset.name as string;
    source.select(name === source.selected() ? "" : name);
  }
  function onKey(event: KeyboardEvent): void {
    if (event.key === "Escape" && source.selected()) source.select("");
  }
  // drag the graph to pan (a drag of more than a few pixels is not a click on a node)
  let drag: { x: number; y: number; left: number; top: number; moved: boolean } | null = null;
  let suppressClick = false;
  function onPointerDown(event: PointerEvent): void {
    if (event.button !== 0) return;
    const box = viewport.getBoundingClientRect();
    // not on the scrollbars
    const { clientWidth: cw, clientHeight: ch } = viewport;
    if ((cw && event.clientX - box.left >= cw) || (ch && event.clientY - box.top >= ch)) return;
    drag = { x: event.clientX, y: event.clientY, left: viewport.scrollLeft, top: viewport.scrollTop, moved: false };
    window.addEventListener("pointermove", onPointerMove);
    window.addEventListener("pointerup", onPointerUp);
  }
  function onPointerMove(event: PointerEvent): void {
    if (!drag) return;
    const dx = event.clientX - drag.x;
    const dy = event.clientY - drag.y;
    if (!drag.moved && Math.abs(dx) + Math.abs(dy) < 4) return;
    if (!drag.moved) {
      drag.moved = true;
      viewport.classList.add("rho-panning");
    }
    viewport.scrollLeft = drag.left - dx;
    viewport.scrollTop = drag.top - dy;
    event.preventDefault();
  }
  function onPointerUp(): void {
    window.removeEventListener("pointermove", onPointerMove);
    window.removeEventListener("pointerup", onPointerUp);
    if (drag?.moved) {
      suppressClick = true;
      window.setTimeout(() => (suppressClick = false), 0);
    }
    viewport.classList.remove("rho-panning");
    drag = null;
  }
  function onClickCapture(event: MouseEvent): void {
    if (!suppressClick) return;
    suppressClick = false;
    event.stopPropagation();
    event.preventDefault();
  }
  function onWheel(event: WheelEvent): void {
    if (!wheelAlways && !event.ctrlKey && !event.metaKey) return;
    event.preventDefault();
    zoomChosen = true;
    const box = viewport.getBoundingClientRect();
    setZoom(zoom * wheelFactor(event.deltaY, event.deltaMode), event.clientX - box.left, event.clientY - box.top);
  }
  viewport.addEventListener("pointerdown", onPointerDown);
  viewport.addEventListener("click", onClickCapture, true);
  viewport.addEventListener("wheel", onWheel, { passive: false });
  viewport.addEventListener("click", onClick);
  el.addEventListener("keydown", onKey);
  el.tabIndex = 0;
  cancelButton.addEventListener("click", () => {
    cancelButton.disabled = true;
    source.action("cancel");
  });
  resumeButton.addEventListener("click", () => {
    resumeButton.disabled = true;
    source.action("resume");
  });
  zoomIn.addEventListener("click", () => {
    zoomChosen = true;
    setZoom(stepZoom(zoom, 1));
  });
  zoomOut.addEventListener("click", () => {
    zoomChosen = true;
    setZoom(stepZoom(zoom, -1));
  });
  zoomFit.addEventListener("click", fitAll);

  const unsubscribe = source.subscribe((change: Change) => {
    if (change.layout) {
      drawGraph();
      highlight();
    }
    if (change.nodes) updateNodes(change.nodes);
    if (change.forms) renderForms();
    if (change.run) {
      updateRun();
      resumeButton.disabled = false;
    }
    if (change.selected) {
      highlight();
      renderPane();
    } else if (change.detail) {
      renderPane();
    } else if (change.output) {
      appendOutput(change);
    }
  });

  drawGraph();
  updateRun();
  highlight();
  renderPane();
  renderForms();
  const timer = window.setInterval(tick, 1000);
  // the starting zoom and the pane's place once the element has a size, and again when it changes
  const resized = (): void => {
    placePane();
    autoZoom();
  };
  // (in the next frame: resizing the graph from the observer's callback could resize `el` again)
  const observer = typeof ResizeObserver === "function" ? new ResizeObserver(() => requestAnimationFrame(resized)) : null;
  observer?.observe(el);
  requestAnimationFrame(() => {
    resized();
    el.dataset.renderMs = (performance.now() - started).toFixed(1);
  });
  el.dataset.renderSyncMs = (performance.now() - started).toFixed(1);

  return () => {
    unmountTimeline();
    window.clearInterval(timer);
    observer?.disconnect();
    unsubscribe();
    onPointerUp();
    el.removeEventListener("keydown", onKey);
  };
}
