"""The ``rho-notebook`` command line, a thin layer over :mod:`rho_notebook.service`."""
