"""Process layer for command and shell nodes.

:mod:`rho_notebook.exec.verify` opens frozen executables, script interpreters and working
directories through no-follow handles and checks them against the plan;
:mod:`rho_notebook.exec.process` launches a verified process through those handles and supervises
its process group (bounded output, timeout, cancellation, exit status).
"""
