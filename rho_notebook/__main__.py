"""``python -m rho_notebook`` is the ``rho-notebook`` command."""

from rho_notebook.cli.main import command

command()
