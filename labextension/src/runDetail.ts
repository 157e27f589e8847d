// The selected run, under the lists: a head (workflow, run ID, "Open" in the main area, close),
// its approvals and its live DAG (the shared view of @rho-notebook/dagview over a RunSource that
// follows the run's event stream). RunMainView is the same DAG, wider, in the main area. An item
// graph's human step shows its form in the DAG view itself (RunSource.forms), as in the notebook.
//
// In the sidebar the DAG starts fitted (the whole graph in its viewport, however narrow the
// sidebar) and stays fitted as the sidebar is resized or the graph grows, until the reader zooms
// (the "100%" setting starts at the view's own readable zoom instead). A step that starts waiting
// for a person (an approval card, a human step's form) is scrolled into view once.

import { Widget } from "@lumino/widgets";
import { renderDag, type RunRowJson } from "@rho-notebook/dagview";

import type { JournalRecord, RhoApi } from "./api";
import { ApprovalsPanel } from "./approvals";
import { errorText, h, shortId } from "./dom";
import { RunSource } from "./source";

/**
 * Keep the DAG view in `el` fitted to its viewport (by its own "fit" button, so the view keeps its
 * zoom state) whenever the viewport's size or the drawn graph changes, until the reader zooms in
 * or out (+ / − / Ctrl+wheel); their "fit" click fits again from then on. Returns the stop function.
 */
export function keepFitted(el: HTMLElement): () => void {
  const viewport = el.querySelector<HTMLElement>(".rho-viewport");
  if (!viewport) return () => undefined;
  let fitting = true;
  let frame = 0;
  let size = "";
  const fit = (): void => {
    frame = 0;
    if (fitting && viewport.clientWidth) el.querySelector<HTMLButtonElement>(".rho-zoom-fit")?.click();
  };
  const soon = (): void => {
    if (fitting && !frame) frame = requestAnimationFrame(fit);
  };
  const resized = (): void => {
    const now = `${viewport.clientWidth}x${viewport.clientHeight}`;
    if (now === size) return;
    size = now;
    soon();
  };
  const onClick = (event: Event): void => {
    const target = event.target as Element | null;
    if (!event.isTrusted || !target?.closest) return;
    if (target.closest(".rho-zoom-in, .rho-zoom-out")) fitting = false;
    else if (target.closest(".rho-zoom-fit")) fitting = true;
  };
  const onWheel = (event: WheelEvent): void => {
    if (event.ctrlKey || event.metaKey) fitting = false;
  };
  const sizes = typeof ResizeObserver === "function" ? new ResizeObserver(resized) : null;
  sizes?.observe(viewport);
  const redraws = new MutationObserver(soon); // a new graph (a script run grew): fit it again
  redraws.observe(viewport, { childList: true });
  el.addEventListener("click", onClick, true);
  viewport.addEventListener("wheel", onWheel, { capture: true, passive: true });
  soon();
  return () => {
    sizes?.disconnect();
    redraws.disconnect();
    if (frame) cancelAnimationFrame(frame);
    el.removeEventListener("click", onClick, true);
    viewport.removeEventListener("wheel", onWheel, { capture: true });
  };
}

/**
 * Scroll each newly shown waiting step of `node` (an approval card, a human step's form) into view
 * once, so a person sees what waits for them even in a short, narrow sidebar.
 */
export function revealWaiting(node: HTMLElement): () => void {
  const seen = new Set<string>();
  let frame = 0;
  const check = (): void => {
    frame = 0;
    const waiting = Array.from(node.querySelectorAll<HTMLElement>(".rho-sb-approval[data-request-id], .rho-forms:not([hidden]) form.rho-form[data-request]"));
    for (const item of waiting) {
      const key = item.dataset.requestId ?? item.dataset.request ?? "";
      if (!key || seen.has(key)) continue;
      seen.add(key);
      item.scrollIntoView?.({ block: "nearest" });
      node.dataset.revealed = key;
      return;
    }
  };
  const changes = new MutationObserver(() => {
    if (!frame) frame = requestAnimationFrame(check);
  });
  changes.observe(node, { childList: true, subtree: true, attributes: true, attributeFilter: ["hidden"] });
  frame = requestAnimationFrame(check); // what is already drawn
  return () => {
    changes.disconnect();
    if (frame) cancelAnimationFrame(frame);
  };
}

/** The run opened in the main area: the same DAG view, wider. */
export class RunMainView extends Widget {
  private cleanup: (() => void) | null = null;

  constructor(private readonly source: RunSource) {
    super();
    this.addClass("rho-main-run");
    // the tab has the wheel to itself: it zooms without Ctrl
    this.cleanup = renderDag(this.node, source, { wheelZoom: "always" });
  }

  dispose(): void {
    this.cleanup?.();
    this.cleanup = null;
    this.source.dispose();
    super.dispose();
  }
}

export interface SelectedRunOptions {
  api: RhoApi;
  /** A journal record of the selected run arrived (null: its event stream ended). */
  record: (record: JournalRecord | null) => void;
  /** Cancel or Resume was clicked in the DAG's toolbar. */
  action: (kind: "cancel" | "resume") => void;
  /** "Open" was clicked: show the run in the main area. */
  openMain: (runId: string) => void;
  /** The close button was clicked. */
  close: () => void;
  /** A fork of the run started from its node pane ("fork from here"): its run ID. */
  forked?: (runId: string) => void;
}

export class SelectedRun {
  readonly node = h("section", { class: "rho-sb-selected", hidden: "" });
  /** The selected run ("" when none). */
  runId = "";
  /** The selected run's DagSource, once its view loaded. */
  source: RunSource | null = null;
  private approvals: ApprovalsPanel | null = null;
  private dagCleanup: (() => void) | null = null;
  private watchCleanup: (() => void) | null = null;
  /** The starting zoom of a run's DAG: "fit" (the whole graph) or "100%" (the view's own). */
  private defaultZoom = "fit";

  constructor(private readonly options: SelectedRunOptions) {}

  setDefaultZoom(zoom: string): void {
    this.defaultZoom = zoom === "100%" ? "100%" : "fit";
  }

  approvalCount(): number {
    return this.approvals?.shown.length ?? 0;
  }

  async approveOnly(): Promise<boolean> {
    return (await this.approvals?.approveOnly()) ?? false;
  }

  /** Show `runId` (replacing the run shown); resolves when its DAG and approvals are shown. */
  async open(runId: string, row: RunRowJson | undefined): Promise<void> {
    this.close();
    this.runId = runId;
    const dag = h("div", { class: "rho-sb-dag" });
    const approvals = new ApprovalsPanel(this.options.api, runId);
    this.approvals = approvals;
    const open = h("button", { class: "rho-sb-btn rho-sb-open", type: "button", title: "open this run's DAG in the main area" }, "\u2197");
    const close = h("button", { class: "rho-sb-btn rho-sb-close", type: "button", title: "close" }, "\u2715");
    this.node.replaceChildren(
      h(
        "div",
        { class: "rho-sb-sel-head" },
        h("b", { class: "rho-sb-name", title: row?.workflow ?? "run" }, row?.workflow ?? "run"),
        h("code", { title: runId }, shortId(runId)),
        h("span", { class: "rho-sb-spacer" }),
        open,
        close,
      ),
      approvals.node,
      dag,
    );
    this.node.dataset.runId = runId;
    this.node.hidden = false;
    close.addEventListener("click", () => this.options.close());
    open.addEventListener("click", () => this.options.openMain(runId));
    let source: RunSource;
    try {
      source = await RunSource.open(this.options.api, runId, { record: this.options.record, action: this.options.action });
    } catch (error) {
      dag.textContent = errorText(error);
      return;
    }
    if (this.runId !== runId) {
      source.dispose();
      return;
    }
    this.source = source;
    source.onForked = this.options.forked ?? null;
    const undraw = renderDag(dag, source);
    const unfit = this.defaultZoom === "fit" ? keepFitted(dag) : () => undefined;
    this.dagCleanup = () => {
      unfit();
      undraw();
    };
    this.watchCleanup = revealWaiting(this.node);
    await approvals.load();
  }

  close(): void {
    this.watchCleanup?.();
    this.watchCleanup = null;
    this.dagCleanup?.();
    this.dagCleanup = null;
    this.source?.dispose();
    this.source = null;
    this.approvals?.dispose();
    this.approvals = null;
    this.runId = "";
    this.node.hidden = true;
    this.node.replaceChildren();
    delete this.node.dataset.runId;
  }

  /** The run list changed and has this run's new row: follow it again if it went live, refresh. */
  update(row: RunRowJson): void {
    const source = this.source;
    if (!source) return;
    if (row.live && !source.following) source.follow();
    source.scheduleRefresh();
    void this.loadApprovals();
  }

  async loadApprovals(): Promise<void> {
    await this.approvals?.load();
  }
}
