// JupyterLab notifications (the toasts of @jupyterlab/apputils' Notification, JupyterLab >= 4.1)
// for what a person outside the sidebar should know: a run starts waiting for them (an approval, a
// human step's form, a script decision, a recovery) and a run ends. It compares consecutive run
// lists of the status-bar poll (statusItem.ts); the first list only sets the baseline, so opening
// JupyterLab does not replay old news. Off when the "notifications" setting is false.

import { Notification } from "@jupyterlab/apputils";
import type { RunRowJson } from "@rho-notebook/dagview";

import { shortId } from "./dom";
import { waitingFor } from "./statusItem";

interface Seen {
  live: boolean;
  waiting: number;
}

const WAIT_TOAST_MS = 15000;
const END_TOAST_MS = 8000;

/** What the lifecycle asks of a person, in the words of the CLI (docs/running.md). */
function waitText(row: RunRowJson, count: number): string {
  const next = row.next ?? `rho-notebook resume ${row.run_id}`; // the server's wording of the CLI's rule
  if (row.lifecycle === "needs_decision") return `needs a decision: ${next}`;
  if (row.lifecycle === "needs_recovery") return `needs recovery: ${next}`;
  return count === 1 ? "waits for a person: 1 request" : `waits for a person: ${count} requests`;
}

function runName(row: RunRowJson): string {
  return `${row.workflow || "run"} ${shortId(row.run_id)}`;
}

export class RunNotifier {
  private seen: Map<string, Seen> | null = null;
  /** When this lab started watching: a run first seen finished ended before it unless updated since. */
  private readonly since = Date.now();

  constructor(
    private readonly options: {
      /** Open the sidebar with this run selected (the toast's "Show" button). */
      open: (runId: string) => void;
      /** Whether notifications are on (the setting, read at each poll). */
      enabled: () => boolean;
    },
  ) {}

  /** Compare a new run list with the last one and notify what changed. */
  update(rows: RunRowJson[] | null): void {
    if (rows === null) return;
    const previous = this.seen;
    this.seen = new Map(rows.map((row) => [row.run_id, { live: row.live, waiting: waitingFor(row) }]));
    if (previous === null || !this.options.enabled()) return;
    for (const row of rows) {
      const before = previous.get(row.run_id);
      const waiting = waitingFor(row);
      if (waiting > (before?.waiting ?? 0)) this.waits(row, waiting);
      else if (!row.live && (before ? before.live : this.isNew(row))) this.ended(row);
    }
  }

  /** A run not seen before that ended: new if it changed after this lab started (a run quicker than one poll). */
  private isNew(row: RunRowJson): boolean {
    const updated = row.updated_at ? Date.parse(row.updated_at) : NaN;
    return Number.isFinite(updated) && updated >= this.since && row.outcome !== null;
  }

  private actions(row: RunRowJson): Notification.IAction[] {
    return [{ label: "Show", caption: "Show this run in the Workflows sidebar", callback: () => this.options.open(row.run_id) }];
  }

  private waits(row: RunRowJson, count: number): void {
    Notification.warning(`${runName(row)} ${waitText(row, count)}`, {
      autoClose: WAIT_TOAST_MS,
      actions: this.actions(row),
    });
  }

  private ended(row: RunRowJson): void {
    const outcome = row.outcome ?? row.lifecycle;
    const message = `${runName(row)} ended: ${outcome}`;
    const options = { autoClose: END_TOAST_MS, actions: this.actions(row) };
    if (outcome === "success") Notification.success(message, options);
    else if (outcome === "cancellation") Notification.info(message, options);
    else Notification.error(message, options);
  }
}
