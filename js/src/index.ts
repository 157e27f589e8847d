// @rho-notebook/dagview: what the notebook widget and the JupyterLab sidebar share. The DAG view
// (renderDag and its helpers), the view model it draws from, the DagSource base class, and the
// types: the wire types generated from rho_notebook/service/wire.py plus the view's own. The
// anywidget entry (widget.ts) is not part of the library: build.mjs bundles it for the kernel.

export { formCard, formValues, h, jsonTree, markdownHtml, renderDag, roundGroups, STATE_STYLE } from "./dagview";
export type { FormCardOptions } from "./dagview";
export {
  attemptCells,
  childrenOf,
  countHalted,
  countStates,
  curve,
  DECISION_LABEL,
  DECISION_STYLE,
  decisionText,
  dependencyEnds,
  elapsed,
  formatDuration,
  labelChars,
  nodeLabel,
  nodeMark,
  nodeTitle,
  outputText,
  baseState,
  SHOWN_LABEL,
  SHOWN_STATES,
  SHOWN_VARIANTS,
  shownDone,
  shownOf,
  STATES,
  stateOf,
  TERMINAL_STATES,
} from "./model";
export { BaseDagSource } from "./source";
export { hoverText, mountTimeline, requestTimeline, segments, timelineSvg, usageLines } from "./timeline";
export type { Segment, SegmentKind, TimelineBar, TimelineJson, TimelineModel, TimelineRow, UsageView } from "./timeline";
export type * from "./types";
