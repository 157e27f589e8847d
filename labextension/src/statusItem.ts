// The status-bar item: how many runs are live and how many requests wait for a person, from the
// server's run list (GET /rho/api/runs), polled at the settings' refresh interval. Clicking it opens
// the Workflows sidebar. The same poll feeds the notifications (notify.ts), so the status bar and
// the toasts never disagree and the server sees one extra request per interval, not two.

import type { RunRowJson } from "@rho-notebook/dagview";
import { Widget } from "@lumino/widgets";

import type { RhoApi } from "./api";

/** Lifecycles of a run that cannot go on until a person acts (resume, decide, recover). */
const NEEDS_PERSON = new Set(["needs_decision", "needs_recovery"]);

/** How many requests of this run wait for a person: its waiting nodes, or 1 when the run itself does. */
export function waitingFor(row: RunRowJson): number {
  if (row.waiting > 0) return row.waiting;
  return NEEDS_PERSON.has(row.lifecycle) ? 1 : 0;
}

export interface RunCounts {
  live: number;
  waiting: number;
}

export function countRuns(rows: RunRowJson[]): RunCounts {
  let live = 0;
  let waiting = 0;
  for (const row of rows) {
    if (row.live) live += 1;
    waiting += waitingFor(row);
  }
  return { live, waiting };
}

/**
 * Polls the run list every `intervalMs` while started and hands each answer to the listeners.
 * A failed poll (server extension missing, server down) is reported as null and polling goes on.
 */
export class RunPoller {
  private timer: number | null = null;
  private running = false;
  private intervalMs: number;
  private readonly listeners: ((rows: RunRowJson[] | null, error: string) => void)[] = [];

  constructor(
    private readonly api: RhoApi,
    intervalMs: number,
  ) {
    this.intervalMs = intervalMs;
  }

  listen(listener: (rows: RunRowJson[] | null, error: string) => void): void {
    this.listeners.push(listener);
  }

  setInterval(intervalMs: number): void {
    this.intervalMs = Math.max(250, intervalMs);
    if (this.running) {
      this.stop();
      this.start();
    }
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    const tick = async (): Promise<void> => {
      await this.poll();
      if (this.running) this.timer = window.setTimeout(tick, this.intervalMs);
    };
    void tick();
  }

  stop(): void {
    this.running = false;
    if (this.timer !== null) window.clearTimeout(this.timer);
    this.timer = null;
  }

  /** Poll once now (the palette's Refresh). */
  async poll(): Promise<void> {
    let rows: RunRowJson[] | null = null;
    let error = "";
    try {
      rows = await this.api.runs();
    } catch (caught) {
      error = caught instanceof Error ? caught.message : String(caught);
    }
    for (const listener of this.listeners) listener(rows, error);
  }
}

const TITLE = "rho_notebook workflows: live runs and requests waiting for a person (click: open the Workflows sidebar)";

/** The item itself: "<n> live · <m> waiting", emphasised while someone is waited for. */
export class WorkflowsStatus extends Widget {
  private readonly text = document.createElement("span");

  constructor(open: () => void) {
    super();
    this.addClass("rho-status-item");
    this.addClass("jp-mod-highlighted");
    this.node.title = TITLE;
    this.node.setAttribute("role", "button");
    this.node.tabIndex = 0;
    this.text.className = "rho-status-text";
    this.node.append(this.text);
    this.node.addEventListener("click", open);
    this.node.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") open();
    });
    this.showCounts({ live: 0, waiting: 0 }, "");
  }

  showCounts(counts: RunCounts, error: string): void {
    this.node.dataset.live = String(counts.live);
    this.node.dataset.waiting = String(counts.waiting);
    this.node.classList.toggle("rho-status-waiting", counts.waiting > 0);
    this.node.classList.toggle("rho-status-error", error !== "");
    const waiting = counts.waiting ? ` \u00b7 ${counts.waiting} waiting` : "";
    this.text.textContent = error ? "Workflows: ?" : `Workflows: ${counts.live} live${waiting}`;
    this.node.title = error ? `rho_notebook workflows: cannot read the run list (${error})` : TITLE;
  }

  /** Show what a poll answered (null when it failed). */
  showPoll(rows: RunRowJson[] | null, error: string): void {
    this.showCounts(rows ? countRuns(rows) : { live: 0, waiting: 0 }, rows ? "" : error || "no answer");
  }
}
