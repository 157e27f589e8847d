"""Node executors and the process layer under them.

:mod:`rho_notebook.exec.verify` opens frozen executables, script interpreters and working
directories through no-follow handles and checks them against the plan;
:mod:`rho_notebook.exec.process` launches a verified process through those handles and supervises
its process group (bounded output, timeout, cancellation, exit status). The command and shell
executor (:mod:`~rho_notebook.exec.command`) and the Python executor
(:mod:`~rho_notebook.exec.python`, a frozen module's function in the frozen interpreter) share one
supervised attempt (``exec/_supervised.py``); agents and approvals have their own executors.
"""
