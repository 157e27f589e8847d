"use strict";(self.rspackChunkrho_notebook=self.rspackChunkrho_notebook||[]).push([[968],{"../node_modules/css-loader/dist/cjs.js!../js/src/dagview.css"(o,r,e){var a=e("../node_modules/css-loader/dist/runtime/noSourceMaps.js"),t=e.n(a),n=e("../node_modules/css-loader/dist/runtime/api.js"),d=(e.n(n))()(t());d.push([o.id,`/* The DAG view (dagview.ts). Colours per state are set inline from STATE_STYLE in the legend;
   node colours repeat them here so the graph needs no per-node inline style. */
.rho-dag {
  --rho-fg: var(--jp-ui-font-color1, #111827);
  --rho-muted: var(--jp-ui-font-color2, #6b7280);
  --rho-bg: var(--jp-layout-color1, #ffffff);
  --rho-line: var(--jp-border-color1, #d1d5db);
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
.rho-dag .rho-badge-running, .rho-dag .rho-badge-cancelling { border-color: #2563eb; color: #2563eb; }
.rho-dag .rho-outcome-success { border-color: #16a34a; color: #16a34a; }
.rho-dag .rho-outcome-failure, .rho-dag .rho-outcome-blocked, .rho-dag .rho-outcome-denial { border-color: #dc2626; color: #dc2626; }
.rho-dag .rho-outcome-cancellation { border-color: #d97706; color: #d97706; }
.rho-dag .rho-outcome-stalled { border-color: #7c3aed; color: #7c3aed; }
.rho-dag .rho-badge.rho-badge-needs_decision { border-color: #a16207; color: #a16207; background: #fef08a; }
.rho-dag .rho-badge-needs_recovery { border-color: #ea580c; color: #ea580c; }
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
.rho-dag .rho-cancel { border-color: #d97706; }
.rho-dag .rho-resume { border-color: #2563eb; }
.rho-dag .rho-chip {
  border: 1px solid; border-radius: 10px; padding: 0 6px; color: #111827; white-space: nowrap;
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
.rho-dag .rho-edge { fill: none; stroke: #9ca3af; stroke-width: 1.2; }
.rho-dag .rho-edge-cond { stroke-dasharray: 5 4; }
.rho-dag .rho-dep { fill: none; stroke: #7c3aed; stroke-width: 2; opacity: 0.85; }
.rho-dag .rho-node { cursor: pointer; }
.rho-dag .rho-node rect { stroke-width: 1.5; }
.rho-dag .rho-node .rho-label { fill: #111827; }
.rho-dag .rho-node .rho-icon { font-weight: bold; }
.rho-dag .rho-node .rho-when { fill: #6b7280; font-size: 9px; }
/* reused: a stored success of the same reuse key, nothing launched (state colour kept, a mark added) */
.rho-dag .rho-node .rho-reused-mark { fill: #0f766e; font-size: 9px; font-style: italic; }
.rho-dag .rho-node.rho-reused rect { stroke: #0f766e; stroke-width: 2.5; }
/* replayed: a script step answered from the journal, nothing ran (styled like reused) */
.rho-dag .rho-node.rho-replayed rect { stroke: #0f766e; stroke-width: 2.5; }
/* needs decision: a script run stopped at this step (model.ts DECISION_STYLE) */
.rho-dag .rho-node.rho-halted rect { fill: #fef08a; stroke: #a16207; stroke-width: 3; stroke-dasharray: 5 3; animation: none; }
.rho-dag .rho-node.rho-halted .rho-reused-mark { fill: #a16207; font-weight: bold; font-style: normal; }
.rho-dag .rho-node:hover rect { stroke-width: 2.5; }
.rho-dag .rho-s-pending rect { fill: #f3f4f6; stroke: #9ca3af; } .rho-dag .rho-s-pending .rho-icon { fill: #9ca3af; }
.rho-dag .rho-s-ready rect { fill: #e0f2fe; stroke: #0ea5e9; } .rho-dag .rho-s-ready .rho-icon { fill: #0ea5e9; }
.rho-dag .rho-s-running rect { fill: #dbeafe; stroke: #2563eb; animation: rho-pulse 1.2s ease-in-out infinite; }
.rho-dag .rho-s-running .rho-icon { fill: #2563eb; }
.rho-dag .rho-s-success rect { fill: #dcfce7; stroke: #16a34a; } .rho-dag .rho-s-success .rho-icon { fill: #16a34a; }
.rho-dag .rho-s-failure rect { fill: #fee2e2; stroke: #dc2626; } .rho-dag .rho-s-failure .rho-icon { fill: #dc2626; }
.rho-dag .rho-s-denial rect { fill: #fae8ff; stroke: #a21caf; } .rho-dag .rho-s-denial .rho-icon { fill: #a21caf; }
.rho-dag .rho-s-cancellation rect { fill: #fef3c7; stroke: #d97706; } .rho-dag .rho-s-cancellation .rho-icon { fill: #d97706; }
.rho-dag .rho-s-skipped rect { fill: #f8fafc; stroke: #94a3b8; stroke-dasharray: 3 2; } .rho-dag .rho-s-skipped .rho-icon { fill: #94a3b8; }
.rho-dag .rho-s-blocked rect { fill: #ffedd5; stroke: #ea580c; } .rho-dag .rho-s-blocked .rho-icon { fill: #ea580c; }
@keyframes rho-pulse { 50% { stroke-opacity: 0.35; } }
.rho-dag svg.rho-has-sel .rho-node { opacity: 0.45; }
.rho-dag svg.rho-has-sel .rho-edge { opacity: 0.35; }
.rho-dag svg.rho-has-sel .rho-node.rho-sel, .rho-dag svg.rho-has-sel .rho-node.rho-need,
.rho-dag svg.rho-has-sel .rho-node.rho-child { opacity: 1; }
.rho-dag .rho-node.rho-sel rect { stroke: #7c3aed; stroke-width: 3; }
.rho-dag .rho-node.rho-need rect { stroke: #7c3aed; stroke-width: 2; }
.rho-dag .rho-node.rho-child rect { stroke-dasharray: 2 2; }
.rho-dag .rho-pane-head { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; margin-bottom: 4px; }
.rho-dag .rho-pane-head .rho-close { margin-left: auto; }
.rho-dag .rho-kind { color: var(--rho-muted); font-family: var(--jp-code-font-family, monospace); }
.rho-dag .rho-live { color: #2563eb; }
.rho-dag .rho-reason { color: var(--rho-muted); margin: 2px 0 4px; }
.rho-dag .rho-provenance { margin: 2px 0 4px; font-family: var(--jp-code-font-family, monospace); font-size: 11px; }
.rho-dag .rho-reused-from { color: #0f766e; }
.rho-dag .rho-replayed-note { color: #0f766e; }
.rho-dag .rho-halted-why { color: #a16207; font-weight: 600; }
.rho-dag .rho-carried { color: #15803d; }
.rho-dag .rho-section { margin: 4px 0; }
.rho-dag .rho-section > summary { cursor: pointer; font-weight: 600; }
.rho-dag pre.rho-stream, .rho-dag .rho-definition pre {
  margin: 2px 0; padding: 4px 6px; max-height: 260px; overflow: auto; white-space: pre-wrap; word-break: break-all;
  background: var(--jp-layout-color2, #f9fafb); border-radius: 3px; font-size: 11.5px;
}
.rho-dag pre.rho-stderr { color: #b91c1c; }
.rho-dag .rho-note { color: var(--rho-muted); font-size: 11px; font-style: italic; }
.rho-dag .rho-truncated { color: #b45309; font-style: normal; font-weight: 600; }
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
.rho-dag .rho-json-key { color: #7c3aed; }
.rho-dag .rho-json-string { color: #15803d; }
.rho-dag .rho-json-number { color: #1d4ed8; }
.rho-dag .rho-json-boolean, .rho-dag .rho-json-null { color: #b45309; }
/* human steps of an item graph waiting for a person: the form, and the node's mark */
.rho-dag .rho-forms { display: flex; flex-direction: column; gap: 6px; margin: 4px 0; }
.rho-dag .rho-form { border: 1px solid #d0a000; border-radius: 6px; padding: 6px 8px; background: #fffbeb; font-size: 12px; }
.rho-dag .rho-form-head { margin-bottom: 4px; }
.rho-dag .rho-form-prompt { white-space: pre-wrap; margin-bottom: 6px; }
.rho-dag .rho-form-fields { display: grid; grid-template-columns: max-content minmax(8em, 24em); gap: 4px 8px; align-items: center; }
.rho-dag .rho-field { display: contents; }
.rho-dag .rho-field-label { font-weight: 600; }
.rho-dag .rho-required { color: #b00; }
.rho-dag .rho-field-bool .rho-field-input { justify-self: start; }
.rho-dag .rho-form-error { color: #b00; margin-top: 4px; white-space: pre-wrap; }
.rho-dag .rho-form-actions { display: flex; gap: 6px; align-items: center; margin-top: 6px; }
.rho-dag .rho-node.rho-asking rect { stroke: #d0a000; stroke-width: 3; }
.rho-dag .rho-round-group rect { fill: none; stroke: #94a3b8; stroke-dasharray: 4 3; }
.rho-dag .rho-round-group text { fill: #64748b; font-size: 10px; }
`,""]),e.d(r,{},{A:d})},"../node_modules/css-loader/dist/cjs.js!./style/index.css"(o,r,e){var a=e("../node_modules/css-loader/dist/runtime/noSourceMaps.js"),t=e.n(a),n=e("../node_modules/css-loader/dist/runtime/api.js"),d=e.n(n),s=e("../node_modules/css-loader/dist/cjs.js!../js/src/dagview.css"),i=d()(t());i.i(s.A),i.push([o.id,`/* The Workflows sidebar. The DAG view's own stylesheet comes from the shared workspace package. */

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
.rho-sb-lc-running, .rho-sb-lc-cancelling { border-color: #2563eb; color: #2563eb; }
.rho-sb-lc-waiting { border-color: #a21caf; color: #a21caf; }
.rho-sb-lc-needs_recovery { border-color: #ea580c; color: #ea580c; }
.rho-sb-lc-needs_decision { border-color: #a16207; color: #a16207; background: #fef08a; }
.rho-sb-decision { color: #a16207; font-weight: 600; }
.rho-sb-oc-success { border-color: #16a34a; color: #16a34a; }
.rho-sb-oc-failure, .rho-sb-oc-blocked, .rho-sb-oc-denial { border-color: #dc2626; color: #dc2626; }
.rho-sb-oc-cancellation { border-color: #d97706; color: #d97706; }
.rho-sb-oc-stalled { border-color: #7c3aed; color: #7c3aed; }
.rho-sb-waiting { color: #a21caf; font-weight: 600; }
.rho-sb-btn {
  border: 1px solid var(--jp-border-color1); background: var(--jp-layout-color2); color: var(--jp-ui-font-color1);
  border-radius: 4px; padding: 1px 7px; cursor: pointer; font-size: 12px; line-height: 18px;
}
.rho-sb-btn:hover:not(:disabled) { background: var(--jp-layout-color3); }
.rho-sb-btn:disabled { opacity: 0.5; cursor: default; }
.rho-sb-delete { padding: 0 5px; color: var(--jp-ui-font-color2); }
.rho-sb-approve, .rho-sb-confirm-run { border-color: #16a34a; color: #15803d; font-weight: 600; }
.rho-sb-deny { border-color: #dc2626; color: #b91c1c; }
.rho-sb-confirm, .rho-sb-approval {
  margin: 6px 0 2px; padding: 6px; border: 1px dashed var(--jp-border-color1); border-radius: 4px; background: var(--jp-layout-color2);
}
.rho-sb-approval { border: 1px solid #a21caf; }
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
`,""]),e.d(r,{},{A:i})},"../node_modules/css-loader/dist/runtime/api.js"(o){o.exports=function(o){var r=[];return r.toString=function(){return this.map(function(r){var e="",a=void 0!==r[5];return r[4]&&(e+="@supports (".concat(r[4],") {")),r[2]&&(e+="@media ".concat(r[2]," {")),a&&(e+="@layer".concat(r[5].length>0?" ".concat(r[5]):""," {")),e+=o(r),a&&(e+="}"),r[2]&&(e+="}"),r[4]&&(e+="}"),e}).join("")},r.i=function(o,e,a,t,n){"string"==typeof o&&(o=[[null,o,void 0]]);var d={};if(a)for(var s=0;s<this.length;s++){var i=this[s][0];null!=i&&(d[i]=!0)}for(var l=0;l<o.length;l++){var h=[].concat(o[l]);a&&d[h[0]]||(void 0!==n&&(void 0===h[5]||(h[1]="@layer".concat(h[5].length>0?" ".concat(h[5]):""," {").concat(h[1],"}")),h[5]=n),e&&(h[2]&&(h[1]="@media ".concat(h[2]," {").concat(h[1],"}")),h[2]=e),t&&(h[4]?(h[1]="@supports (".concat(h[4],") {").concat(h[1],"}"),h[4]=t):h[4]="".concat(t)),r.push(h))}},r}},"../node_modules/css-loader/dist/runtime/noSourceMaps.js"(o){o.exports=function(o){return o[1]}},"../node_modules/style-loader/dist/runtime/injectStylesIntoStyleTag.js"(o){var r=[];function e(o){for(var e=-1,a=0;a<r.length;a++)if(r[a].identifier===o){e=a;break}return e}function a(o,a){for(var t={},n=[],d=0;d<o.length;d++){var s=o[d],i=a.base?s[0]+a.base:s[0],l=t[i]||0,h="".concat(i," ").concat(l);t[i]=l+1;var c=e(h),p={css:s[1],media:s[2],sourceMap:s[3],supports:s[4],layer:s[5]};if(-1!==c)r[c].references++,r[c].updater(p);else{var f=function(o,r){var e=r.domAPI(r);return e.update(o),function(r){r?(r.css!==o.css||r.media!==o.media||r.sourceMap!==o.sourceMap||r.supports!==o.supports||r.layer!==o.layer)&&e.update(o=r):e.remove()}}(p,a);a.byIndex=d,r.splice(d,0,{identifier:h,updater:f,references:1})}n.push(h)}return n}o.exports=function(o,t){var n=a(o=o||[],t=t||{});return function(o){o=o||[];for(var d=0;d<n.length;d++){var s=e(n[d]);r[s].references--}for(var i=a(o,t),l=0;l<n.length;l++){var h=e(n[l]);0===r[h].references&&(r[h].updater(),r.splice(h,1))}n=i}}},"../node_modules/style-loader/dist/runtime/insertBySelector.js"(o){var r={};o.exports=function(o,e){var a=function(o){if(void 0===r[o]){var e=document.querySelector(o);if(window.HTMLIFrameElement&&e instanceof window.HTMLIFrameElement)try{e=e.contentDocument.head}catch(o){e=null}r[o]=e}return r[o]}(o);if(!a)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");a.appendChild(e)}},"../node_modules/style-loader/dist/runtime/insertStyleElement.js"(o){o.exports=function(o){var r=document.createElement("style");return o.setAttributes(r,o.attributes),o.insert(r,o.options),r}},"../node_modules/style-loader/dist/runtime/setAttributesWithoutAttributes.js"(o,r,e){o.exports=function(o){var r=e.nc;r&&o.setAttribute("nonce",r)}},"../node_modules/style-loader/dist/runtime/styleDomAPI.js"(o){o.exports=function(o){if("u"<typeof document)return{update:function(){},remove:function(){}};var r=o.insertStyleElement(o);return{update:function(e){var a,t,n;a="",e.supports&&(a+="@supports (".concat(e.supports,") {")),e.media&&(a+="@media ".concat(e.media," {")),(t=void 0!==e.layer)&&(a+="@layer".concat(e.layer.length>0?" ".concat(e.layer):""," {")),a+=e.css,t&&(a+="}"),e.media&&(a+="}"),e.supports&&(a+="}"),(n=e.sourceMap)&&"u">typeof btoa&&(a+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),o.styleTagTransform(a,r,o.options)},remove:function(){var o;null===(o=r).parentNode||o.parentNode.removeChild(o)}}}},"../node_modules/style-loader/dist/runtime/styleTagTransform.js"(o){o.exports=function(o,r){if(r.styleSheet)r.styleSheet.cssText=o;else{for(;r.firstChild;)r.removeChild(r.firstChild);r.appendChild(document.createTextNode(o))}}},"./style/index.js"(o,r,e){var a=e("../node_modules/style-loader/dist/runtime/injectStylesIntoStyleTag.js"),t=e.n(a),n=e("../node_modules/style-loader/dist/runtime/styleDomAPI.js"),d=e.n(n),s=e("../node_modules/style-loader/dist/runtime/insertBySelector.js"),i=e.n(s),l=e("../node_modules/style-loader/dist/runtime/setAttributesWithoutAttributes.js"),h=e.n(l),c=e("../node_modules/style-loader/dist/runtime/insertStyleElement.js"),p=e.n(c),f=e("../node_modules/style-loader/dist/runtime/styleTagTransform.js"),g=e.n(f),u=e("../node_modules/css-loader/dist/cjs.js!./style/index.css"),m={};m.styleTagTransform=g(),m.setAttributes=h(),m.insert=i().bind(null,"head"),m.domAPI=d(),m.insertStyleElement=p(),t()(u.A,m),u.A&&u.A.locals&&u.A.locals}}]);