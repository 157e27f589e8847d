"""The run layer: owning a run (owner); one execution (journal, snapshot, cancel, gate, completion,
teardown) held by the DAG loop (driver, with its pure scheduler) and the channel loop
(script_driver); one replay decision module (replay: take a stored result, run, halt or diverge);
reading a run's status, cancel requests, the owner's wake-up socket, waiting for approvals,
recovery of a dead owner's attempts, and the checkout lock."""
