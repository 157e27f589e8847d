// Bundle the anywidget entry (src/widget.ts, which imports the framework-free src/dagview.ts)
// into ../rho_notebook/widgets/static/dag.js as one ES module, and copy the stylesheet.
// The bundle is committed: installs without Node must render. Usage: npm run build
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(here, "../rho_notebook/widgets/static");
mkdirSync(out, { recursive: true });

await build({
  entryPoints: [resolve(here, "src/widget.ts")],
  outfile: resolve(out, "dag.js"),
  bundle: true,
  format: "esm",
  target: "es2020",
  minify: true,
  legalComments: "eof",
  sourcemap: false,
  logLevel: "info",
});
copyFileSync(resolve(here, "src/dagview.css"), resolve(out, "dag.css"));
