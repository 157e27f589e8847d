// Cancel and Resume, as the DAG toolbar asks for them. Cancel is sent at once (the server journals
// the request; the owner acknowledges it). Resume first shows the run's graph digest in a dialog and
// sends it with the request, so the server resumes only that frozen graph; a run whose owner exited
// uncleanly also offers to recover its uncertain attempts.

import { Dialog, showDialog, showErrorMessage } from "@jupyterlab/apputils";
import { Widget } from "@lumino/widgets";

import type { RhoApi } from "./api";
import { errorText, h } from "./dom";

/** "requested": the server accepted; "declined": the person closed the dialog; "failed": an error was shown. */
export type ActionOutcome = "requested" | "declined" | "failed";

export async function runAction(
  api: RhoApi,
  kind: "cancel" | "resume",
  run: { runId: string; digest: string; lifecycle: string | undefined },
): Promise<ActionOutcome> {
  try {
    if (kind === "cancel") {
      await api.cancel(run.runId);
      return "requested";
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

function digestBody(text: string, digest: string): Widget {
  const body = new Widget();
  body.node.append(h("p", {}, text), h("code", { class: "rho-sb-digest" }, digest));
  return body;
}
