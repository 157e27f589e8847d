"use strict";(self.rspackChunkrho_notebook=self.rspackChunkrho_notebook||[]).push([[968],{"../node_modules/css-loader/dist/cjs.js!../js/src/dagview.css"(r,o,e){var a=e("../node_modules/css-loader/dist/runtime/noSourceMaps.js"),t=e.n(a),s=e("../node_modules/css-loader/dist/runtime/api.js"),i=(e.n(s))()(t());i.push([r.id,`/* The DAG view (dagview.ts). Colours per state are set inline from STATE_STYLE in the legend;
   node colours repeat them here so the graph needs no per-node inline style.

   Theme: every colour is a JupyterLab theme variable, so the light, dark and any other theme read
   well; the literal after the comma is the fallback where no theme sets the variable (the widget
   outside JupyterLab). tests/unit/test_theme_colours.py keeps literals out of everything else.
   A state's colours are custom properties: --rho-state-NAME its line and icon colour, and
   --rho-state-NAME-bg its fill, a tint of the line colour over the background (dark in a dark
   theme). STATE_STYLE (dagview.ts) names these properties; the lab sidebar's badges use them too. */
.rho-dag, .rho-sidebar, .rho-status-item {
  --rho-fg: var(--jp-ui-font-color1, #111827);
  --rho-muted: var(--jp-ui-font-color2, #6b7280);
  --rho-bg: var(--jp-layout-color1, #ffffff);
  --rho-line: var(--jp-border-color1, #d1d5db);
  --rho-edge: var(--jp-border-color0, #9ca3af);
  --rho-violet: color-mix(in srgb, var(--jp-brand-color1, #2563eb) 55%, var(--jp-error-color1, #dc2626));
  --rho-magenta: color-mix(in srgb, var(--jp-error-color1, #dc2626) 55%, var(--jp-brand-color1, #2563eb));
  --rho-reused: var(--jp-info-color0, #0f766e);
  --rho-state-pending: var(--jp-layout-color4, #9ca3af);
  --rho-state-ready: var(--jp-info-color1, #0ea5e9);
  --rho-state-running: var(--jp-brand-color1, #2563eb);
  --rho-state-success: var(--jp-success-color1, #16a34a);
  --rho-state-failure: var(--jp-error-color1, #dc2626);
  --rho-state-denial: var(--rho-magenta);
  --rho-state-cancellation: var(--jp-warn-color1, #d97706);
  --rho-state-skipped: var(--jp-border-color0, #94a3b8);
  --rho-state-blocked: var(--jp-warn-color0, #ea580c);
  --rho-state-stalled: var(--rho-violet);
  --rho-state-waiting: var(--rho-magenta);
  --rho-state-waiting_for_approval: var(--rho-magenta);
  --rho-state-failure_allowed: color-mix(in srgb, var(--jp-error-color1, #dc2626) 50%, var(--jp-layout-color4, #9ca3af));
  --rho-state-failure_handled: var(--rho-state-failure_allowed);
  --rho-state-denial_handled: color-mix(in srgb, var(--rho-magenta) 50%, var(--jp-layout-color4, #9ca3af));
  --rho-state-needs_recovery: var(--jp-warn-color0, #ea580c);
  --rho-state-decision: var(--jp-warn-color0, #a16207);
  --rho-state-pending-bg: color-mix(in srgb, var(--rho-state-pending) 12%, var(--rho-bg));
  --rho-state-ready-bg: color-mix(in srgb, var(--rho-state-ready) 14%, var(--rho-bg));
  --rho-state-running-bg: color-mix(in srgb, var(--rho-state-running) 16%, var(--rho-bg));
  --rho-state-success-bg: color-mix(in srgb, var(--rho-state-success) 16%, var(--rho-bg));
  --rho-state-failure-bg: color-mix(in srgb, var(--rho-state-failure) 16%, var(--rho-bg));
  --rho-state-denial-bg: color-mix(in srgb, var(--rho-state-denial) 14%, var(--rho-bg));
  --rho-state-cancellation-bg: color-mix(in srgb, var(--rho-state-cancellation) 16%, var(--rho-bg));
  --rho-state-skipped-bg: color-mix(in srgb, var(--rho-state-skipped) 6%, var(--rho-bg));
  --rho-state-blocked-bg: color-mix(in srgb, var(--rho-state-blocked) 16%, var(--rho-bg));
  --rho-state-stalled-bg: color-mix(in srgb, var(--rho-state-stalled) 14%, var(--rho-bg));
  --rho-state-waiting-bg: color-mix(in srgb, var(--rho-state-waiting) 10%, var(--rho-bg));
  --rho-state-waiting_for_approval-bg: color-mix(in srgb, var(--rho-state-waiting_for_approval) 12%, var(--rho-bg));
  --rho-state-failure_allowed-bg: color-mix(in srgb, var(--rho-state-failure_allowed) 10%, var(--rho-bg));
  --rho-state-failure_handled-bg: color-mix(in srgb, var(--rho-state-failure_handled) 10%, var(--rho-bg));
  --rho-state-denial_handled-bg: color-mix(in srgb, var(--rho-state-denial_handled) 10%, var(--rho-bg));
  --rho-state-decision-bg: color-mix(in srgb, var(--jp-warn-color2, #facc15) 40%, var(--rho-bg));
}
.rho-dag {
  font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: 12px;
  color: var(--rho-fg);
  outline: none;
}
.rho-dag .rho-toolbar, .rho-dag .rho-legend {
  display: flex; flex-wrap: wrap; align-items: center; gap: 6px; margin: 2px 0 4px;
}
.rho-dag .rho-title { font-weight: 600; font-size: 13px; }
.rho-dag .rho-spacer { flex: 1; }
.rho-dag .rho-badge {
  border: 1px solid var(--rho-line); border-radius: 10px; padding: 0 8px; font-family: var(--jp-code-font-family, monospace);
}
.rho-dag .rho-badge-running, .rho-dag .rho-badge-cancelling { border-color: var(--rho-state-running); color: var(--rho-state-running); }
.rho-dag .rho-outcome-success { border-color: var(--rho-state-success); color: var(--rho-state-success); }
.rho-dag .rho-outcome-failure, .rho-dag .rho-outcome-blocked, .rho-dag .rho-outcome-denial { border-color: var(--rho-state-failure); color: var(--rho-state-failure); }
.rho-dag .rho-outcome-cancellation { border-color: var(--rho-state-cancellation); color: var(--rho-state-cancellation); }
.rho-dag .rho-outcome-stalled { border-color: var(--rho-state-stalled); color: var(--rho-state-stalled); }
.rho-dag .rho-badge.rho-badge-needs_decision { border-color: var(--rho-state-decision); color: var(--rho-fg); background: var(--rho-state-decision-bg); }
.rho-dag .rho-badge-needs_recovery { border-color: var(--rho-state-needs_recovery); color: var(--rho-state-needs_recovery); }
.rho-dag .rho-run-output { margin: 2px 0 4px; font-size: 12px; overflow-wrap: anywhere; }
.rho-dag .rho-run-output code { font-family: var(--jp-code-font-family, monospace); }
.rho-dag .rho-elapsed { font-family: var(--jp-code-font-family, monospace); color: var(--rho-muted); }
.rho-dag .rho-message { color: var(--rho-muted); font-style: italic; }
.rho-dag .rho-btn {
  border: 1px solid var(--rho-line); background: var(--jp-layout-color2, #f9fafb); color: var(--rho-fg);
  border-radius: 4px; padding: 1px 8px; cursor: pointer; font-size: 12px; line-height: 18px;
}
.rho-dag .rho-btn:hover:not(:disabled) { background: var(--jp-layout-color3, #e5e7eb); }
.rho-dag .rho-btn:disabled { opacity: 0.5; cursor: default; }
.rho-dag .rho-cancel { border-color: var(--rho-state-cancellation); }
.rho-dag .rho-resume { border-color: var(--rho-state-running); }
.rho-dag .rho-chip {
  border: 1px solid; border-radius: 10px; padding: 0 6px; color: var(--rho-fg); white-space: nowrap;
}
.rho-dag .rho-chip i { font-style: normal; font-weight: bold; }
.rho-dag .rho-chip.rho-zero { opacity: 0.45; }
.rho-dag .rho-edge-note { color: var(--rho-muted); font-size: 11px; }
/* The node pane sits below the graph, or beside it when the view is wide (data-pane, set by
   dagview.ts from the view's width): it never lies over the graph. */
.rho-dag .rho-body { display: flex; flex-direction: column; gap: 8px; align-items: stretch; }
.rho-dag[data-pane="side"] .rho-body { flex-direction: row; }
.rho-dag .rho-viewport {
  flex: 1 1 auto; min-width: 0; max-height: 560px; overflow: auto; border: 1px solid var(--rho-line);
  border-radius: 4px; background: var(--rho-bg); cursor: grab; user-select: none; -webkit-user-select: none;
}
.rho-dag .rho-viewport.rho-panning { cursor: grabbing; }
.rho-dag .rho-pane {
  flex: 0 1 auto; min-width: 0; max-height: 560px; overflow: auto; border: 1px solid var(--rho-line);
  border-radius: 4px; padding: 6px 8px; background: var(--rho-bg);
}
.rho-dag[data-pane="side"] .rho-viewport { flex: 1 1 60%; }
.rho-dag[data-pane="side"] .rho-pane { flex: 1 1 40%; }
.rho-dag .rho-zoom-level {
  min-width: 3.2em; text-align: center; color: var(--rho-muted); font-family: var(--jp-code-font-family, monospace); font-size: 11px;
}
.rho-dag .rho-pane[hidden] { display: none; }
.rho-dag svg.rho-graph { display: block; margin: 0 auto; font-family: var(--jp-code-font-family, monospace); font-size: 12px; }
.rho-dag .rho-edge { fill: none; stroke: var(--rho-edge); stroke-width: 1.2; }
.rho-dag .rho-edge-cond { stroke-dasharray: 5 4; }
.rho-dag .rho-dep { fill: none; stroke: var(--rho-violet); stroke-width: 2; opacity: 0.85; }
.rho-dag .rho-node { cursor: pointer; }
.rho-dag .rho-node rect { stroke-width: 1.5; }
.rho-dag .rho-node .rho-label { fill: var(--rho-fg); }
.rho-dag .rho-node .rho-icon { font-weight: bold; }
.rho-dag .rho-node .rho-when { fill: var(--rho-muted); font-size: 9px; }
/* reused: a stored success of the same reuse key, nothing launched (state colour kept, a mark added) */
.rho-dag .rho-node .rho-reused-mark { fill: var(--rho-reused); font-size: 9px; font-style: italic; }
.rho-dag .rho-node.rho-reused rect { stroke: var(--rho-reused); stroke-width: 2.5; }
/* replayed: a script step answered from the journal, nothing ran (styled like reused) */
.rho-dag .rho-node.rho-replayed rect { stroke: var(--rho-reused); stroke-width: 2.5; }
/* needs decision: a script run stopped at this step (model.ts DECISION_STYLE) */
.rho-dag .rho-node.rho-halted rect { fill: var(--rho-state-decision-bg); stroke: var(--rho-state-decision); stroke-width: 3; stroke-dasharray: 5 3; animation: none; }
.rho-dag .rho-node.rho-halted .rho-reused-mark { fill: var(--rho-state-decision); font-weight: bold; font-style: normal; }
.rho-dag .rho-node:hover rect { stroke-width: 2.5; }
.rho-dag .rho-s-pending rect { fill: var(--rho-state-pending-bg); stroke: var(--rho-state-pending); } .rho-dag .rho-s-pending .rho-icon { fill: var(--rho-state-pending); }
.rho-dag .rho-s-ready rect { fill: var(--rho-state-ready-bg); stroke: var(--rho-state-ready); } .rho-dag .rho-s-ready .rho-icon { fill: var(--rho-state-ready); }
.rho-dag .rho-s-running rect { fill: var(--rho-state-running-bg); stroke: var(--rho-state-running); animation: rho-pulse 1.2s ease-in-out infinite; }
.rho-dag .rho-s-running .rho-icon { fill: var(--rho-state-running); }
.rho-dag .rho-s-success rect { fill: var(--rho-state-success-bg); stroke: var(--rho-state-success); } .rho-dag .rho-s-success .rho-icon { fill: var(--rho-state-success); }
.rho-dag .rho-s-failure rect { fill: var(--rho-state-failure-bg); stroke: var(--rho-state-failure); } .rho-dag .rho-s-failure .rho-icon { fill: var(--rho-state-failure); }
.rho-dag .rho-s-denial rect { fill: var(--rho-state-denial-bg); stroke: var(--rho-state-denial); } .rho-dag .rho-s-denial .rho-icon { fill: var(--rho-state-denial); }
.rho-dag .rho-s-cancellation rect { fill: var(--rho-state-cancellation-bg); stroke: var(--rho-state-cancellation); } .rho-dag .rho-s-cancellation .rho-icon { fill: var(--rho-state-cancellation); }
.rho-dag .rho-s-skipped rect { fill: var(--rho-state-skipped-bg); stroke: var(--rho-state-skipped); stroke-dasharray: 3 2; } .rho-dag .rho-s-skipped .rho-icon { fill: var(--rho-state-skipped); }
.rho-dag .rho-s-blocked rect { fill: var(--rho-state-blocked-bg); stroke: var(--rho-state-blocked); } .rho-dag .rho-s-blocked .rho-icon { fill: var(--rho-state-blocked); }
/* shown states (views/state.py \`shown\`): an allowed or handled failure does not count against the
   run (dashed, muted); a launch waiting for approval started nothing (dashed, no pulse) */
.rho-dag .rho-s-waiting_for_approval rect { fill: var(--rho-state-waiting_for_approval-bg); stroke: var(--rho-state-waiting_for_approval); stroke-dasharray: 6 3; }
.rho-dag .rho-s-waiting_for_approval .rho-icon { fill: var(--rho-state-waiting_for_approval); }
.rho-dag .rho-s-failure_allowed rect { fill: var(--rho-state-failure_allowed-bg); stroke: var(--rho-state-failure_allowed); stroke-dasharray: 4 3; }
.rho-dag .rho-s-failure_allowed .rho-icon { fill: var(--rho-state-failure_allowed); }
.rho-dag .rho-s-failure_handled rect { fill: var(--rho-state-failure_handled-bg); stroke: var(--rho-state-failure_handled); stroke-dasharray: 2 2; }
.rho-dag .rho-s-failure_handled .rho-icon { fill: var(--rho-state-failure_handled); }
.rho-dag .rho-s-denial_handled rect { fill: var(--rho-state-denial_handled-bg); stroke: var(--rho-state-denial_handled); stroke-dasharray: 2 2; }
.rho-dag .rho-s-denial_handled .rho-icon { fill: var(--rho-state-denial_handled); }
.rho-dag .rho-chip.rho-variant { border-style: dashed; }
.rho-dag .rho-chip[hidden] { display: none; }
@keyframes rho-pulse { 50% { stroke-opacity: 0.35; } }
.rho-dag svg.rho-has-sel .rho-node { opacity: 0.45; }
.rho-dag svg.rho-has-sel .rho-edge { opacity: 0.35; }
.rho-dag svg.rho-has-sel .rho-node.rho-sel, .rho-dag svg.rho-has-sel .rho-node.rho-need,
.rho-dag svg.rho-has-sel .rho-node.rho-child { opacity: 1; }
.rho-dag .rho-node.rho-sel rect { stroke: var(--rho-violet); stroke-width: 3; }
.rho-dag .rho-node.rho-need rect { stroke: var(--rho-violet); stroke-width: 2; }
.rho-dag .rho-node.rho-child rect { stroke-dasharray: 2 2; }
.rho-dag .rho-pane-head { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; margin-bottom: 4px; }
.rho-dag .rho-pane-head .rho-close { margin-left: auto; }
.rho-dag .rho-kind { color: var(--rho-muted); font-family: var(--jp-code-font-family, monospace); }
.rho-dag .rho-live { color: var(--rho-state-running); }
.rho-dag .rho-reason { color: var(--rho-muted); margin: 2px 0 4px; }
.rho-dag .rho-provenance { margin: 2px 0 4px; font-family: var(--jp-code-font-family, monospace); font-size: 11px; }
.rho-dag .rho-reused-from { color: var(--rho-reused); }
.rho-dag .rho-replayed-note { color: var(--rho-reused); }
.rho-dag .rho-halted-why { color: var(--rho-state-decision); font-weight: 600; }
.rho-dag .rho-carried { color: var(--rho-state-success); }
.rho-dag .rho-section { margin: 4px 0; }
.rho-dag .rho-section > summary { cursor: pointer; font-weight: 600; }
.rho-dag pre.rho-stream, .rho-dag .rho-definition pre {
  margin: 2px 0; padding: 4px 6px; max-height: 260px; overflow: auto; white-space: pre-wrap; word-break: break-all;
  background: var(--jp-layout-color2, #f9fafb); border-radius: 3px; font-size: 11.5px;
}
.rho-dag pre.rho-stderr { color: var(--jp-error-color1, #b91c1c); }
.rho-dag .rho-note { color: var(--rho-muted); font-size: 11px; font-style: italic; }
.rho-dag .rho-truncated { color: var(--jp-warn-color0, #b45309); font-style: normal; font-weight: 600; }
.rho-dag .rho-markdown { line-height: 1.45; }
.rho-dag .rho-markdown pre { background: var(--jp-layout-color2, #f9fafb); padding: 4px; overflow: auto; }
.rho-dag .rho-table-scroll { overflow-x: auto; max-width: 100%; }
.rho-dag table.rho-attempts { border-collapse: collapse; font-size: 11px; white-space: nowrap; }
.rho-dag table.rho-attempts td, .rho-dag table.rho-attempts th { border: 1px solid var(--rho-line); padding: 1px 4px; text-align: left; }
.rho-dag dl.rho-definition { display: grid; grid-template-columns: max-content 1fr; gap: 2px 8px; margin: 2px 0; }
.rho-dag dl.rho-definition dt { color: var(--rho-muted); }
.rho-dag dl.rho-definition dd { margin: 0; font-family: var(--jp-code-font-family, monospace); word-break: break-all; }
.rho-dag .rho-json { font-family: var(--jp-code-font-family, monospace); }
.rho-dag .rho-json-children { padding-left: 14px; }
.rho-dag .rho-json-leaf { padding-left: 14px; font-family: var(--jp-code-font-family, monospace); }
.rho-dag .rho-json-key { color: var(--jp-mirror-editor-property-color, #7c3aed); }
.rho-dag .rho-json-string { color: var(--jp-mirror-editor-string-color, #15803d); }
.rho-dag .rho-json-number { color: var(--jp-mirror-editor-number-color, #1d4ed8); }
.rho-dag .rho-json-boolean, .rho-dag .rho-json-null { color: var(--jp-mirror-editor-keyword-color, #b45309); }
/* human steps of an item graph waiting for a person: the form, and the node's mark */
.rho-dag .rho-forms { display: flex; flex-direction: column; gap: 6px; margin: 4px 0; }
.rho-dag .rho-form {
  border: 1px solid var(--jp-warn-color2, #d0a000); border-radius: 6px; padding: 6px 8px; font-size: 12px;
  background: color-mix(in srgb, var(--jp-warn-color2, #d0a000) 10%, var(--rho-bg));
}
.rho-dag .rho-form-head { margin-bottom: 4px; }
.rho-dag .rho-form-prompt { white-space: pre-wrap; margin-bottom: 6px; }
.rho-dag .rho-form-fields { display: grid; grid-template-columns: max-content minmax(8em, 24em); gap: 4px 8px; align-items: center; }
.rho-dag .rho-field { display: contents; }
.rho-dag .rho-field-label { font-weight: 600; }
.rho-dag .rho-required { color: var(--jp-error-color1, #b00); }
.rho-dag .rho-field-bool .rho-field-input { justify-self: start; }
.rho-dag .rho-form-error { color: var(--jp-error-color1, #b00); margin-top: 4px; white-space: pre-wrap; }
.rho-dag .rho-form-actions { display: flex; gap: 6px; align-items: center; margin-top: 6px; }
.rho-dag .rho-node.rho-asking rect { stroke: var(--jp-warn-color1, #d0a000); stroke-width: 3; }
.rho-dag .rho-round-group rect { fill: none; stroke: var(--rho-state-skipped); stroke-dasharray: 4 3; }
.rho-dag .rho-round-group text { fill: var(--rho-muted); font-size: 10px; }

/* "fork from here" in the node pane of a completed run (forkform.ts) */
.rho-dag .rho-section-fork .rho-fork-value { display: block; width: 100%; box-sizing: border-box; font-family: var(--jp-code-font-family, monospace); font-size: 12px; margin: 4px 0; }
.rho-dag .rho-section-fork .rho-fork-actions { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; margin-top: 6px; }
.rho-dag .rho-section-fork .rho-fork-error { color: var(--jp-error-color1, #b00); margin-top: 4px; white-space: pre-wrap; }
.rho-dag .rho-section-fork .rho-fork-digest { display: block; word-break: break-all; margin: 4px 0; }
.rho-dag .rho-section-fork .rho-fork-result { margin-top: 4px; color: var(--jp-success-color1, #2a7); }

/* The "DAG | Timeline" tabs of a run and the Timeline panel (timeline.ts). */
.rho-dag .rho-tabs { display: flex; gap: 2px; margin: 2px 0 4px; }
.rho-dag .rho-tab[aria-selected="true"] { font-weight: 600; border-bottom: 2px solid var(--rho-state-running); }
.rho-dag .rho-timeline { overflow: auto; max-height: 70vh; }
.rho-dag .rho-timeline[hidden],
.rho-dag .rho-body[hidden] { display: none; }
.rho-dag .rho-tl-note { font-size: 11px; opacity: 0.8; margin: 2px 4px 6px; }
.rho-dag .rho-tl-row:hover { filter: brightness(0.95); }
.rho-dag[data-tab="timeline"] .rho-zoom,
.rho-dag[data-tab="timeline"] .rho-zoom-level,
.rho-dag[data-tab="timeline"] .rho-edge-note { visibility: hidden; }
`,""]),e.d(o,{},{A:i})},"../node_modules/css-loader/dist/cjs.js!./style/index.css"(r,o,e){var a=e("../node_modules/css-loader/dist/runtime/noSourceMaps.js"),t=e.n(a),s=e("../node_modules/css-loader/dist/runtime/api.js"),i=e.n(s),n=e("../node_modules/css-loader/dist/cjs.js!../js/src/dagview.css"),h=e("../node_modules/css-loader/dist/cjs.js!./style/sidebar.css"),d=i()(t());d.i(n.A),d.i(h.A),d.push([r.id,`/* The Workflows sidebar. The DAG view's own stylesheet comes from the shared workspace package;
   it also defines the theme-derived colours used here (--rho-fg, --rho-state-NAME, ...): no colour
   literal in this file (tests/unit/test_theme_colours.py), see docs/jupyterlab.md "Theming". */

/* Layout: header, the lists (one scrolling block), the selected run. With a run selected
   (.rho-sb-focus) the lists shrink to about a third of the height and the run takes the rest. */
.rho-sidebar {
  display: flex;
  flex-direction: column;
  overflow: auto;
  padding: 4px 8px 12px;
  background: var(--jp-layout-color1);
  color: var(--jp-ui-font-color1);
  font-family: var(--jp-ui-font-family);
  font-size: var(--jp-ui-font-size1);
  min-width: 260px;
}
.rho-sidebar code { font-family: var(--jp-code-font-family); font-size: 11px; }
.rho-sb-head { display: flex; align-items: center; gap: 6px; border-bottom: 1px solid var(--jp-border-color2); }
.rho-sb-head h2 { font-size: 14px; margin: 6px 0; font-weight: 600; }
.rho-sb-status { flex: 1; text-align: right; color: var(--jp-ui-font-color2); font-size: 11px; }
.rho-sb-status.rho-sb-error { color: var(--jp-error-color1); }
.rho-sb-lists { flex: 1 1 auto; min-height: 0; overflow: auto; }
.rho-sidebar.rho-sb-focus .rho-sb-lists { flex: 0 1 auto; max-height: 32%; min-height: 90px; border-bottom: 1px solid var(--jp-border-color2); }
.rho-sb-section h3 { font-size: 12px; margin: 10px 0 4px; text-transform: uppercase; letter-spacing: 0.04em; color: var(--jp-ui-font-color2); }
.rho-sb-fold { cursor: pointer; user-select: none; }
.rho-sb-fold:hover, .rho-sb-fold:focus { color: var(--jp-ui-font-color1); outline: none; }
.rho-sb-caret { display: inline-block; width: 1em; transition: transform 0.1s; }
.rho-sb-section[data-collapsed="true"] .rho-sb-caret { transform: rotate(-90deg); }
.rho-sb-section[data-collapsed="true"] > :not(h3) { display: none; }
.rho-sb-count { font-weight: normal; }
.rho-sb-list { list-style: none; margin: 0; padding: 0; }
.rho-sb-list > li { border: 1px solid var(--jp-border-color2); border-radius: 4px; padding: 4px 6px; margin: 3px 0; }
.rho-sb-list > li.rho-sb-empty { border: none; color: var(--jp-ui-font-color3); font-style: italic; padding: 0 2px; }
.rho-sb-run { cursor: pointer; }
.rho-sb-run:hover, .rho-sb-run:focus { background: var(--jp-layout-color2); outline: none; }
.rho-sb-run.rho-sb-current { border-color: var(--jp-brand-color1); box-shadow: inset 3px 0 0 var(--jp-brand-color1); }
.rho-sb-line { display: flex; align-items: center; gap: 6px; flex-wrap: wrap; margin: 1px 0; }
.rho-sb-sub { color: var(--jp-ui-font-color2); font-size: 11px; }
.rho-sb-name { font-weight: 600; }
.rho-sb-spacer { flex: 1; }
.rho-sb-muted { color: var(--jp-ui-font-color2); font-size: 11px; }
.rho-sb-badge { margin-left: auto; border: 1px solid var(--jp-border-color1); border-radius: 10px; padding: 0 7px; font-size: 11px; font-family: var(--jp-code-font-family); white-space: nowrap; }
.rho-sb-lc-running, .rho-sb-lc-cancelling { border-color: var(--rho-state-running); color: var(--rho-state-running); }
.rho-sb-lc-waiting { border-color: var(--rho-state-waiting); color: var(--rho-state-waiting); }
.rho-sb-lc-needs_recovery { border-color: var(--rho-state-needs_recovery); color: var(--rho-state-needs_recovery); }
.rho-sb-lc-needs_decision { border-color: var(--rho-state-decision); color: var(--rho-fg); background: var(--rho-state-decision-bg); }
.rho-sb-decision { color: var(--rho-state-decision); font-weight: 600; }
.rho-sb-oc-success { border-color: var(--rho-state-success); color: var(--rho-state-success); }
.rho-sb-oc-failure, .rho-sb-oc-blocked, .rho-sb-oc-denial { border-color: var(--rho-state-failure); color: var(--rho-state-failure); }
.rho-sb-oc-cancellation { border-color: var(--rho-state-cancellation); color: var(--rho-state-cancellation); }
.rho-sb-oc-stalled { border-color: var(--rho-state-stalled); color: var(--rho-state-stalled); }
.rho-sb-waiting { color: var(--rho-state-waiting); font-weight: 600; }
.rho-sb-btn {
  border: 1px solid var(--jp-border-color1); background: var(--jp-layout-color2); color: var(--jp-ui-font-color1);
  border-radius: 4px; padding: 1px 7px; cursor: pointer; font-size: 12px; line-height: 18px;
}
.rho-sb-btn:hover:not(:disabled) { background: var(--jp-layout-color3); }
.rho-sb-btn:disabled { opacity: 0.5; cursor: default; }
.rho-sb-delete { padding: 0 5px; color: var(--jp-ui-font-color2); }
.rho-sb-approve, .rho-sb-confirm-run { border-color: var(--rho-state-success); color: var(--rho-state-success); font-weight: 600; }
.rho-sb-deny { border-color: var(--rho-state-failure); color: var(--rho-state-failure); }
.rho-sb-confirm, .rho-sb-approval {
  margin: 6px 0 2px; padding: 6px; border: 1px dashed var(--jp-border-color1); border-radius: 4px; background: var(--jp-layout-color2);
}
.rho-sb-approval { border: 1px solid var(--rho-state-waiting); }
.rho-sb-digest { display: block; word-break: break-all; padding: 3px 4px; margin: 3px 0; background: var(--jp-layout-color1); border-radius: 3px; }
.rho-sb-facts { margin: 4px 0; }
.rho-sb-facts pre, .rho-sb-inputs { white-space: pre-wrap; word-break: break-all; font-size: 11px; margin: 2px 0; }
.rho-sb-comment { flex: 1; min-width: 0; font-size: 12px; }
.rho-sb-authority ul { margin: 2px 0; padding-left: 16px; }
.rho-sb-preview { margin-top: 6px; }
/* the selected run fills what the lists leave; its DAG view fills the run's section: the graph
   gets the height, the node pane (below it, or beside it when the sidebar is wide) at most 38% */
.rho-sb-selected {
  flex: 1 0 auto; display: flex; flex-direction: column; min-height: 380px;
  margin-top: 8px; border-top: 2px solid var(--jp-brand-color1); padding-top: 6px;
}
.rho-sb-selected[hidden] { display: none; }
.rho-sb-sel-head { display: flex; align-items: center; gap: 6px; margin-bottom: 4px; }
.rho-sb-selected .rho-sb-dag { flex: 1 1 0; min-height: 320px; display: flex; flex-direction: column; }
.rho-sidebar .rho-dag .rho-body { flex: 1 1 0; min-height: 0; }
.rho-sidebar .rho-dag .rho-viewport { flex: 1 1 0; min-height: 240px; max-height: none; }
.rho-sidebar .rho-dag[data-pane="below"] .rho-pane { flex: 0 0 auto; max-height: 38vh; }
.rho-sidebar .rho-dag[data-pane="side"] .rho-pane { max-height: none; }
.rho-sidebar .rho-dag .rho-chip.rho-zero { display: none; }
.rho-sidebar .rho-sb-preview .rho-viewport { flex: none; min-height: 0; max-height: 320px; }
/* the run in a main-area tab: the graph fills the tab */
.rho-main-run { padding: 8px; display: flex; flex-direction: column; overflow: hidden; }
.rho-main-run.rho-dag .rho-body { flex: 1 1 0; min-height: 0; }
.rho-main-run.rho-dag .rho-viewport { flex: 1 1 0; max-height: none; min-height: 200px; }
.rho-main-run.rho-dag[data-pane="side"] .rho-viewport { flex: 1 1 60%; }
.rho-main-run.rho-dag[data-pane="below"] .rho-pane { flex: 0 0 auto; max-height: 40%; }
.rho-main-run.rho-dag[data-pane="side"] .rho-pane { flex: 1 1 40%; max-height: none; }
.rho-sb-link { border: none; background: none; padding: 0; color: var(--jp-content-link-color); cursor: pointer; font-size: 11px; font-style: normal; }
.rho-sb-link:hover { text-decoration: underline; }
/* the status-bar item (statusItem.ts): live runs and requests waiting for a person */
.rho-status-item { display: flex; align-items: center; padding: 0 5px; cursor: pointer; color: var(--jp-ui-font-color1); }
.rho-status-item.rho-status-waiting .rho-status-text { color: var(--rho-state-waiting); font-weight: 600; }
.rho-status-item.rho-status-error .rho-status-text { color: var(--jp-ui-font-color2); }
`,""]),e.d(o,{},{A:d})},"../node_modules/css-loader/dist/cjs.js!./style/sidebar.css"(r,o,e){var a=e("../node_modules/css-loader/dist/runtime/noSourceMaps.js"),t=e.n(a),s=e("../node_modules/css-loader/dist/runtime/api.js"),i=(e.n(s))()(t());i.push([r.id,`/* The Workflows sidebar at JupyterLab's default width (250 px) and up: search and filter over the
   runs, rows whose buttons stay on one line, the DAG view's toolbar in two rows (run, then zoom),
   values that wrap at spaces and scroll sideways instead of breaking mid-token, digests on one
   line, and the compare view. Imported by index.css; colours only through theme variables
   (var(--jp-..., fallback) or the --rho-* ones dagview.css derives from them). */

.rho-sidebar { min-width: 0; }

/* -- the run lists: search, filter, compare ------------------------------------------------------ */
.rho-sb-runbar { display: flex; align-items: center; gap: 4px; margin: 6px 0 2px; flex-wrap: nowrap; }
.rho-sb-search {
  flex: 1 1 auto; min-width: 0; font-size: 12px; padding: 2px 4px;
  border: 1px solid var(--jp-border-color1, #bdbdbd); border-radius: 3px;
  background: var(--jp-input-background, var(--jp-layout-color1, #fff)); color: var(--jp-ui-font-color1, #1f2937);
}
.rho-sb-filter {
  flex: 0 1 auto; min-width: 0; max-width: 45%; font-size: 12px;
  background: var(--jp-input-background, var(--jp-layout-color1, #fff)); color: var(--jp-ui-font-color1, #1f2937);
  border: 1px solid var(--jp-border-color1, #bdbdbd); border-radius: 3px;
}
.rho-sb-compare { flex: 0 0 auto; }
.rho-sb-pick { flex: 0 0 auto; margin: 0; }
/* a row's first line: checkbox, name (ellipsised), badge and buttons, never wrapped */
.rho-sb-list > li > .rho-sb-line:first-child { flex-wrap: nowrap; min-width: 0; }
.rho-sb-list .rho-sb-name, .rho-sb-sel-head .rho-sb-name {
  min-width: 0; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
}
.rho-sb-list > li > .rho-sb-line:first-child > :not(.rho-sb-name) { flex-shrink: 0; }
.rho-sb-list .rho-sb-run .rho-sb-name { flex: 0 1 auto; min-width: 3.5em; }
.rho-sb-list > li > .rho-sb-line:first-child > .rho-sb-badge { flex-shrink: 1; min-width: 0; overflow: hidden; text-overflow: ellipsis; }
.rho-sb-act {
  display: block; margin: 2px 0 1px; padding: 2px 4px; white-space: pre; overflow-x: auto;
  background: var(--jp-layout-color2, #f3f4f6); border-radius: 3px; color: var(--jp-ui-font-color1, #1f2937);
}
.rho-sb-sel-head { flex-wrap: nowrap; min-width: 0; }
.rho-sb-sel-head > :not(.rho-sb-name):not(.rho-sb-spacer):not(code) { flex-shrink: 0; }
.rho-sb-sel-head .rho-sb-name { flex: 0 1 auto; min-width: 6em; }
/* the run ID gives way first (whole in its tooltip) */
.rho-sb-sel-head > code { flex: 0 100 auto; min-width: 3em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }

/* -- digests and values: one line, or wrapped at spaces only ------------------------------------ */
.rho-sidebar .rho-sb-digest {
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis; word-break: normal;
}
.rho-sb-hash { display: flex; align-items: center; gap: 4px; min-width: 0; max-width: 100%; }
.rho-sb-hash code { flex: 1 1 auto; min-width: 0; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.rho-sb-hash .rho-sb-muted { flex: 0 0 auto; }
.rho-sb-copy { flex: 0 0 auto; padding: 0 3px; line-height: 14px; display: inline-flex; align-items: center; }
.rho-sb-copy-icon svg { width: 12px; height: 12px; display: block; }
.rho-sb-copy.rho-sb-copied { border-color: var(--rho-state-success, var(--jp-success-color1, #16a34a)); }
.rho-sidebar .rho-sb-facts pre, .rho-sidebar .rho-sb-inputs, .rho-sidebar .rho-dag pre, .rho-sb-cmp-value pre {
  white-space: pre-wrap; word-break: normal; overflow-wrap: normal; overflow-x: auto;
}
.rho-sidebar .rho-dag .rho-run-output, .rho-sidebar .rho-dag dl.rho-definition dd {
  overflow-wrap: normal; word-break: normal; overflow-x: auto;
}
/* facts stacked (name above value): the value gets the card's whole width */
.rho-sb-launch { margin: 2px 0; font-size: 11px; }
.rho-sb-launch dt { color: var(--jp-ui-font-color2, #6b7280); margin-top: 2px; }
.rho-sb-launch dd { margin: 0 0 0 8px; min-width: 0; display: flex; flex-direction: column; gap: 1px; }
.rho-sb-launch dd > code { white-space: pre-wrap; word-break: normal; overflow-x: auto; }
.rho-sb-argv { display: flex; flex-wrap: wrap; gap: 2px 4px; }
.rho-sb-arg {
  white-space: pre; max-width: 100%; overflow: hidden; text-overflow: ellipsis;
  padding: 0 3px; border-radius: 3px; background: var(--jp-layout-color1, #fff);
}
.rho-sb-prompt { white-space: pre-wrap; }
.rho-sb-digestline { margin: 2px 0; font-size: 11px; }

/* -- the DAG view in the sidebar: the run's row, then the zoom row, each on one line ------------ */
.rho-sidebar .rho-sb-selected .rho-dag .rho-toolbar { flex-wrap: wrap; row-gap: 2px; }
/* the selected run's head above already names the workflow */
.rho-sidebar .rho-sb-selected .rho-dag .rho-title { display: none; }
.rho-sidebar .rho-sb-selected .rho-dag .rho-badge { white-space: nowrap; font-size: 11px; padding: 0 6px; }
.rho-sidebar .rho-sb-selected .rho-dag .rho-elapsed { font-size: 11px; white-space: nowrap; }
/* Cancel and Resume as icons (their titles say what they do) */
.rho-sidebar .rho-sb-selected .rho-dag .rho-cancel, .rho-sidebar .rho-sb-selected .rho-dag .rho-resume {
  font-size: 0; padding: 1px 6px;
}
.rho-sidebar .rho-sb-selected .rho-dag .rho-cancel::before { content: "\\25a0"; font-size: 12px; }
.rho-sidebar .rho-sb-selected .rho-dag .rho-resume::before { content: "\\21bb"; font-size: 12px; }
/* the spacer takes a whole row: the zoom controls go on the next one, together */
.rho-sidebar .rho-sb-selected .rho-dag .rho-spacer { flex: 1 0 100%; height: 0; }
.rho-sidebar .rho-sb-selected .rho-dag .rho-zoom-out { margin-left: auto; }
.rho-sidebar .rho-sb-selected .rho-dag .rho-zoom, .rho-sidebar .rho-sb-selected .rho-dag .rho-zoom-level {
  flex: 0 0 auto; white-space: nowrap; padding: 0 6px;
}
.rho-sidebar .rho-sb-selected .rho-dag .rho-message { flex: 1 1 100%; min-width: 0; font-size: 11px; }
.rho-sidebar .rho-sb-selected .rho-dag .rho-message:empty { display: none; }
.rho-sidebar .rho-sb-selected .rho-dag .rho-viewport { min-height: 180px; }
.rho-sidebar .rho-sb-selected .rho-dag .rho-forms { overflow-x: auto; }

/* -- the compare view ---------------------------------------------------------------------------- */
.rho-sb-compare-view {
  flex: 1 0 auto; display: flex; flex-direction: column; margin-top: 8px;
  border-top: 2px solid var(--jp-brand-color1, #1976d2); padding-top: 6px;
}
.rho-sb-compare-view[hidden] { display: none; }
.rho-sb-cmp-title { font-size: 12px; margin: 8px 0 2px; color: var(--jp-ui-font-color2, #6b7280); }
.rho-sb-diff {
  font-family: var(--jp-code-font-family, monospace); font-size: 11px; padding: 3px 4px;
  background: var(--jp-layout-color2, #f3f4f6); border-radius: 3px; overflow-x: auto;
}
.rho-sb-diff-line { white-space: pre-wrap; word-break: normal; }
.rho-sb-diff-added { color: var(--rho-state-success, var(--jp-success-color1, #15803d)); }
.rho-sb-diff-removed { color: var(--rho-state-failure, var(--jp-error-color1, #b91c1c)); }
.rho-sb-diff-changed { color: var(--jp-warn-color1, #a16207); }
.rho-sb-cmp-node .rho-sb-line:first-child { flex-wrap: wrap; }
.rho-sb-cmp-fact {
  font-size: 11px; border: 1px solid var(--jp-border-color2, #e0e0e0); border-radius: 8px; padding: 0 5px; white-space: nowrap;
}
.rho-sb-cmp-fact[data-what="value"], .rho-sb-cmp-fact[data-what="exit"] { border-color: var(--jp-warn-color1, #a16207); }
.rho-sb-cmp-value { display: grid; grid-template-columns: 2.2em minmax(0, 1fr); gap: 4px; align-items: start; }
.rho-sb-cmp-value pre { margin: 1px 0; font-size: 11px; max-height: 120px; overflow: auto; }
.rho-sb-cmp-same summary { cursor: pointer; font-size: 11px; color: var(--jp-ui-font-color2, #6b7280); margin: 4px 0; }
`,""]),e.d(o,{},{A:i})},"../node_modules/css-loader/dist/runtime/api.js"(r){r.exports=function(r){var o=[];return o.toString=function(){return this.map(function(o){var e="",a=void 0!==o[5];return o[4]&&(e+="@supports (".concat(o[4],") {")),o[2]&&(e+="@media ".concat(o[2]," {")),a&&(e+="@layer".concat(o[5].length>0?" ".concat(o[5]):""," {")),e+=r(o),a&&(e+="}"),o[2]&&(e+="}"),o[4]&&(e+="}"),e}).join("")},o.i=function(r,e,a,t,s){"string"==typeof r&&(r=[[null,r,void 0]]);var i={};if(a)for(var n=0;n<this.length;n++){var h=this[n][0];null!=h&&(i[h]=!0)}for(var d=0;d<r.length;d++){var l=[].concat(r[d]);a&&i[l[0]]||(void 0!==s&&(void 0===l[5]||(l[1]="@layer".concat(l[5].length>0?" ".concat(l[5]):""," {").concat(l[1],"}")),l[5]=s),e&&(l[2]&&(l[1]="@media ".concat(l[2]," {").concat(l[1],"}")),l[2]=e),t&&(l[4]?(l[1]="@supports (".concat(l[4],") {").concat(l[1],"}"),l[4]=t):l[4]="".concat(t)),o.push(l))}},o}},"../node_modules/css-loader/dist/runtime/noSourceMaps.js"(r){r.exports=function(r){return r[1]}},"../node_modules/style-loader/dist/runtime/injectStylesIntoStyleTag.js"(r){var o=[];function e(r){for(var e=-1,a=0;a<o.length;a++)if(o[a].identifier===r){e=a;break}return e}function a(r,a){for(var t={},s=[],i=0;i<r.length;i++){var n=r[i],h=a.base?n[0]+a.base:n[0],d=t[h]||0,l="".concat(h," ").concat(d);t[h]=d+1;var c=e(l),p={css:n[1],media:n[2],sourceMap:n[3],supports:n[4],layer:n[5]};if(-1!==c)o[c].references++,o[c].updater(p);else{var g=function(r,o){var e=o.domAPI(o);return e.update(r),function(o){o?(o.css!==r.css||o.media!==r.media||o.sourceMap!==r.sourceMap||o.supports!==r.supports||o.layer!==r.layer)&&e.update(r=o):e.remove()}}(p,a);a.byIndex=i,o.splice(i,0,{identifier:l,updater:g,references:1})}s.push(l)}return s}r.exports=function(r,t){var s=a(r=r||[],t=t||{});return function(r){r=r||[];for(var i=0;i<s.length;i++){var n=e(s[i]);o[n].references--}for(var h=a(r,t),d=0;d<s.length;d++){var l=e(s[d]);0===o[l].references&&(o[l].updater(),o.splice(l,1))}s=h}}},"../node_modules/style-loader/dist/runtime/insertBySelector.js"(r){var o={};r.exports=function(r,e){var a=function(r){if(void 0===o[r]){var e=document.querySelector(r);if(window.HTMLIFrameElement&&e instanceof window.HTMLIFrameElement)try{e=e.contentDocument.head}catch(r){e=null}o[r]=e}return o[r]}(r);if(!a)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");a.appendChild(e)}},"../node_modules/style-loader/dist/runtime/insertStyleElement.js"(r){r.exports=function(r){var o=document.createElement("style");return r.setAttributes(o,r.attributes),r.insert(o,r.options),o}},"../node_modules/style-loader/dist/runtime/setAttributesWithoutAttributes.js"(r,o,e){r.exports=function(r){var o=e.nc;o&&r.setAttribute("nonce",o)}},"../node_modules/style-loader/dist/runtime/styleDomAPI.js"(r){r.exports=function(r){if("u"<typeof document)return{update:function(){},remove:function(){}};var o=r.insertStyleElement(r);return{update:function(e){var a,t,s;a="",e.supports&&(a+="@supports (".concat(e.supports,") {")),e.media&&(a+="@media ".concat(e.media," {")),(t=void 0!==e.layer)&&(a+="@layer".concat(e.layer.length>0?" ".concat(e.layer):""," {")),a+=e.css,t&&(a+="}"),e.media&&(a+="}"),e.supports&&(a+="}"),(s=e.sourceMap)&&"u">typeof btoa&&(a+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(s))))," */")),r.styleTagTransform(a,o,r.options)},remove:function(){var r;null===(r=o).parentNode||r.parentNode.removeChild(r)}}}},"../node_modules/style-loader/dist/runtime/styleTagTransform.js"(r){r.exports=function(r,o){if(o.styleSheet)o.styleSheet.cssText=r;else{for(;o.firstChild;)o.removeChild(o.firstChild);o.appendChild(document.createTextNode(r))}}},"./style/index.js"(r,o,e){var a=e("../node_modules/style-loader/dist/runtime/injectStylesIntoStyleTag.js"),t=e.n(a),s=e("../node_modules/style-loader/dist/runtime/styleDomAPI.js"),i=e.n(s),n=e("../node_modules/style-loader/dist/runtime/insertBySelector.js"),h=e.n(n),d=e("../node_modules/style-loader/dist/runtime/setAttributesWithoutAttributes.js"),l=e.n(d),c=e("../node_modules/style-loader/dist/runtime/insertStyleElement.js"),p=e.n(c),g=e("../node_modules/style-loader/dist/runtime/styleTagTransform.js"),f=e.n(g),b=e("../node_modules/css-loader/dist/cjs.js!./style/index.css"),u={};u.styleTagTransform=f(),u.setAttributes=l(),u.insert=h().bind(null,"head"),u.domAPI=i(),u.insertStyleElement=p(),t()(b.A,u),b.A&&b.A.locals&&b.A.locals}}]);