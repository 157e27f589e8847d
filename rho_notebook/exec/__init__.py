"""Operations, the node executors that run them, and the process layer under them.

One module per kind of operation, each with a spec (what the attempt runs, built by whoever asks:
a node executor, an item-graph step, a script step) and a ``run``; what a person or a hook
decides on before a launch comes from the same spec:

- :mod:`~rho_notebook.exec.command`: a :class:`~rho_notebook.exec.supervised.ProcessOperation`
  (command and shell nodes, item command steps, script command steps; a script step's is prepared
  by :mod:`~rho_notebook.exec.command_step`, its argv[0] frozen by :mod:`~rho_notebook.exec.freeze`);
- :mod:`~rho_notebook.exec.python`: a frozen module's function in the frozen interpreter;
- :mod:`~rho_notebook.exec.agent`: an :class:`~rho_notebook.exec.agent.AgentOperation`;
- :mod:`~rho_notebook.exec.model`: one completion (script model steps, item model steps, a flow's
  in-memory call);
- :mod:`~rho_notebook.exec.human`, :mod:`~rho_notebook.exec.code`, :mod:`~rho_notebook.exec.passes`
  (set, branch, join, output) and :mod:`~rho_notebook.exec.approval`.

:mod:`rho_notebook.exec.verify` opens frozen executables, script interpreters and working
directories through no-follow handles and checks them against the plan;
:mod:`rho_notebook.exec.launch` starts a verified process from those handles and
:mod:`rho_notebook.exec.process` supervises its process group (bounded output, timeout,
cancellation, exit status). The command and Python operations share one supervised attempt
(:mod:`~rho_notebook.exec.supervised`).
"""
