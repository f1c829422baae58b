"""What the controller reads out of facts and results: the hardware group a result holds for."""
