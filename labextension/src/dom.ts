// Small helpers the sidebar's components share: the DAG view's element builder, short IDs, local times,
// error text, and the "show more" item of the run and plan lists.

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

export function emptyItem(text: string): HTMLElement {
  return h("li", { class: "rho-sb-empty" }, text);
}
