"""Old name of :mod:`rho_notebook.exec.supervised`; kept until every importer uses the public module."""

from rho_notebook.exec.supervised import Ended, FileSink, Judge, conclude, exit_record, process_spec, supervise

__all__ = ["Ended", "FileSink", "Judge", "conclude", "exit_record", "process_spec", "supervise"]
