// The approvals of the selected run: one card per request its owner is waiting on (an approval
// node's prompt as markdown, or a supervised launch's facts), with a comment field and Approve /
// Deny. A decision goes to the server, which journals it; the cards are reloaded after it. An item
// graph's human step (kind "form") is not shown here: the DAG view draws its form (RunSource.forms).

import { showErrorMessage } from "@jupyterlab/apputils";
import { markdownHtml, type ApprovalJson } from "@rho-notebook/dagview";

import type { RhoApi } from "./api";
import { errorText, h } from "./dom";

export class ApprovalsPanel {
  readonly node = h("div", { class: "rho-sb-approvals" });
  /** The request IDs of the cards shown, so an unchanged answer does not redraw (and clear comments). */
  private key = "";
  private disposed = false;

  constructor(
    private readonly api: RhoApi,
    readonly runId: string,
  ) {}

  dispose(): void {
    this.disposed = true;
  }

  /** Load the run's waiting requests and redraw the cards if they changed. */
  async load(): Promise<void> {
    let requests: ApprovalJson[];
    try {
      requests = (await this.api.approvals(this.runId)).filter((r) => r.waiting && r.kind !== "form");
    } catch {
      return; // the next poll or journal record tries again
    }
    if (this.disposed) return;
    const key = requests.map((r) => r.request_id).join(",");
    if (key === this.key) return;
    this.key = key;
    this.node.replaceChildren(...requests.map((r) => this.card(r)));
  }

  private card(request: ApprovalJson): HTMLElement {
    const node = request.node ?? "";
    const requestId = request.request_id ?? "";
    const facts = h("div", { class: "rho-sb-facts" });
    if (request.kind === "node" && typeof request.facts?.prompt === "string") {
      facts.innerHTML = markdownHtml(request.facts.prompt);
    } else {
      facts.append(h("pre", {}, JSON.stringify(request.facts ?? {}, null, 2)));
    }
    const comment = h("input", { class: "rho-sb-comment", type: "text", placeholder: "comment (optional, recorded)" });
    const approve = h("button", { class: "rho-sb-btn rho-sb-approve", type: "button" }, "\u2713 Approve");
    const deny = h("button", { class: "rho-sb-btn rho-sb-deny", type: "button" }, "\u2717 Deny");
    const decide = async (decision: "approve" | "deny"): Promise<void> => {
      approve.disabled = deny.disabled = true;
      try {
        await this.api.decide(request.run_id ?? this.runId, requestId, decision, comment.value);
      } catch (error) {
        void showErrorMessage("The decision was not recorded", errorText(error));
        approve.disabled = deny.disabled = false;
        return;
      }
      this.key = "(decided)"; // forces a redraw, even to an empty list
      await this.load();
    };
    approve.addEventListener("click", () => void decide("approve"));
    deny.addEventListener("click", () => void decide("deny"));
    const what = request.kind === "node" ? "approval node" : "supervised launch";
    return h(
      "div",
      { class: "rho-sb-approval", "data-request-id": requestId, "data-node": node },
      h("div", { class: "rho-sb-line" }, h("b", {}, "\u2691 ", node), h("span", { class: "rho-sb-muted" }, `${what} \u00b7 attempt ${request.attempt ?? ""}`)),
      facts,
      h("div", { class: "rho-sb-muted" }, `facts ${(request.facts_sha256 ?? "").slice(0, 19)}\u2026`),
      h("div", { class: "rho-sb-line" }, comment),
      h("div", { class: "rho-sb-line" }, approve, deny),
    );
  }
}
