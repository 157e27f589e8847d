// Extra Rspack configuration for `jupyter-builder build` (package.json: jupyterlab.rspackConfig),
// merged over @jupyter/builder's own (lib/extensionConfig.js).
//
// The built extension in ../rho_notebook/labextension is committed, and `pip install -e .` rebuilds
// it in whatever directory the repository was cloned to, so the build must not depend on that
// directory. With the production default, `optimization.moduleIds: 'deterministic'`, it did: the
// id of the module federation container entry is a hash of its identifier, and that identifier
// holds the absolute paths of the exposed modules (@jupyter/builder exposes
// `require.resolve(<absolute package path>)`). The id is written into remoteEntry.*.js, so the
// file's content hash, its name and `jupyterlab._build.load` in package.json changed with the
// checkout path, and a fresh clone was dirty after `pip install -e .`.
//
// 'named' ids are module paths relative to the build context (this directory), such as
// "../node_modules/marked/lib/marked.esm.js" and "webpack/container/entry/rho-notebook": the same
// in every checkout, and they stay put when other modules are added or removed.
// tests/unit/test_lab_bundle.py builds at another path and compares byte for byte.
module.exports = {
  optimization: {
    moduleIds: 'named'
  }
};
