// Small helpers the sidebar's components share: the DAG view's element builder, short IDs, local times,
// error text, and the "show more" item of the run and plan lists.

import { copyIcon } from "@jupyterlab/ui-components";
import { h } from "@rho-notebook/dagview";

import { ApiError } from "./api";

export { h };

/** Items a list shows before "show more", and the most it shows after. */
export const SHOWN = 8;
export const SHOWN_ALL = 200;

export function shortId(id: string): string {
  return id.slice(0, 13);
}

/** A timestamp as local time (today) or local date and time. */
export function when(iso: string | null | undefined): string {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const today = new Date().toDateString() === date.toDateString();
  return today ? date.toLocaleTimeString() : date.toLocaleString();
}

export function errorText(error: unknown): string {
  return error instanceof ApiError ? `${error.message} [${error.rule}]` : String(error);
}

/** The last item of a shortened list: a link that toggles between few and all. */
export function moreItem(label: string, toggle: () => void): HTMLElement {
  const button = h("button", { class: "rho-sb-link", type: "button" }, label);
  button.addEventListener("click", toggle);
  return h("li", { class: "rho-sb-empty rho-sb-more" }, button);
}

/**
 * A digest (or other long token) on one line: shown ellipsised, whole in its title and in the
 * clipboard with the copy button, never split over lines.
 */
export function hashLine(value: string, label = ""): HTMLElement {
  const what = label || value.split(":")[0] || "it";
  const copy = h("button", { class: "rho-sb-btn rho-sb-copy", type: "button", title: `copy ${what}`, "aria-label": `copy ${what}` });
  copy.append(copyIcon.element({ tag: "span", className: "rho-sb-copy-icon" }));
  copy.addEventListener("click", (event) => {
    event.stopPropagation();
    void navigator.clipboard?.writeText(value).then(
      () => copy.classList.add("rho-sb-copied"),
      () => undefined,
    );
  });
  return h("span", { class: "rho-sb-hash" }, label ? h("span", { class: "rho-sb-muted" }, label) : null, h("code", { title: value }, value), copy);
}

export function emptyItem(text: string): HTMLElement {
  return h("li", { class: "rho-sb-empty" }, text);
}

/**
 * A list section whose heading folds it: a click (or Enter / Space) on the heading hides or shows
 * everything after it. `data-collapsed` on the section says which.
 */
export function collapsibleSection(title: string, count: HTMLElement, ...content: HTMLElement[]): HTMLElement {
  const caret = h("span", { class: "rho-sb-caret", "aria-hidden": "true" }, "\u25be");
  const heading = h("h3", { class: "rho-sb-fold", role: "button", tabindex: "0", "aria-expanded": "true", title: "fold or unfold this list" }, caret, `${title} `, count);
  const section = h("section", { class: "rho-sb-section", "data-collapsed": "false" }, heading, ...content);
  const toggle = (): void => setCollapsed(section, section.dataset.collapsed !== "true");
  heading.addEventListener("click", toggle);
  heading.addEventListener("keydown", (event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      toggle();
    }
  });
  return section;
}

export function setCollapsed(section: HTMLElement, collapsed: boolean): void {
  section.dataset.collapsed = String(collapsed);
  section.querySelector(".rho-sb-fold")?.setAttribute("aria-expanded", String(!collapsed));
}

export function isCollapsed(section: HTMLElement): boolean {
  return section.dataset.collapsed === "true";
}
