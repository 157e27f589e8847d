"""The run layer: the driver, scheduler, run state, journal events and the checkout lock."""
