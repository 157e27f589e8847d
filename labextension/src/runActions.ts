// Cancel and Resume, as the DAG toolbar asks for them. Cancel is sent at once (the server journals
// the request; the owner acknowledges it). Resume first shows the run's graph digest in a dialog and
// sends it with the request, so the server resumes only that frozen graph; a run whose owner exited
// uncleanly also offers to recover its uncertain attempts. A run that needs a decision goes on from
// a terminal: the dialog shows the command the server words (`next`: `--decide STEP=rerun|skip` per
// halted script step, `--raise-budget` for a run its budget halted).

import { Dialog, showDialog, showErrorMessage } from "@jupyterlab/apputils";
import { Widget } from "@lumino/widgets";

import type { HaltedStepJson } from "@rho-notebook/dagview";

import type { RhoApi } from "./api";
import { errorText, h } from "./dom";

/** "requested": the server accepted; "declined": the person closed the dialog; "failed": an error was shown. */
export type ActionOutcome = "requested" | "declined" | "failed";

export async function runAction(
  api: RhoApi,
  kind: "cancel" | "resume",
  run: { runId: string; digest: string; lifecycle: string | undefined; halted?: HaltedStepJson[]; next?: string },
): Promise<ActionOutcome> {
  try {
    if (kind === "cancel") {
      await api.cancel(run.runId);
      return "requested";
    }
    if (run.lifecycle === "needs_decision") {
      const body = new Widget();
      const halted = run.halted ?? [];
      const command = run.next ?? decideCommand(run.runId, halted);
      const how = command.includes("--decide")
        ? "Decide each (rerun: run the step once more; skip: go on with its stored result) and resume from a terminal:"
        : "Resume it from a terminal:";
      body.node.append(
        h("p", {}, "The run stopped at steps it cannot go on with alone:"),
        h("ul", {}, ...halted.map((s) => h("li", {}, h("code", {}, s.step), `: ${s.why}`))),
        h("p", {}, how),
        h("code", { class: "rho-sb-digest rho-sb-decide" }, command),
      );
      await showDialog({ title: "Needs a decision", body, buttons: [Dialog.okButton({ label: "Close" })] });
      return "declined";
    }
    const body = digestBody(`Resume run ${run.runId} from its frozen graph with graph digest`, run.digest);
    const recover = h("input", { type: "checkbox", class: "rho-sb-recover" });
    if (run.lifecycle === "needs_recovery") {
      body.node.append(
        h("p", {}, "Its owner exited uncleanly: some attempts have no journaled result. Inspect their status and artifacts first."),
        h("label", {}, recover, " recover uncertain attempts (stop leftover processes of this run and rerun them)"),
      );
    }
    const answer = await showDialog({
      title: "Resume run",
      body,
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: "Confirm digest and resume" })],
    });
    if (!answer.button.accept) return "declined";
    await api.resume(run.runId, run.digest, recover.checked);
    return "requested";
  } catch (error) {
    void showErrorMessage(kind === "cancel" ? "Cannot cancel the run" : "Cannot resume the run", errorText(error));
    return "failed";
  }
}

/** `rho-notebook resume RUN --decide a=rerun|skip ...`: the command that goes on after a halt. */
export function decideCommand(runId: string, halted: readonly HaltedStepJson[]): string {
  const decide = halted.length ? halted.map((s) => `--decide ${s.step}=rerun|skip`).join(" ") : "--decide STEP=rerun|skip";
  return `rho-notebook resume ${runId} ${decide}`;
}

function digestBody(text: string, digest: string): Widget {
  const body = new Widget();
  body.node.append(h("p", {}, text), h("code", { class: "rho-sb-digest" }, digest));
  return body;
}
