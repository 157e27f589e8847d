"""rho_notebook: Rho workflows in Jupyter and on the command line."""
