"""The run layer: owning a run (owner), the driver and its pure scheduler, reading a run's status,
cancel requests, the owner's wake-up socket, waiting for approvals, recovery of a dead owner's
attempts, and the checkout lock."""
