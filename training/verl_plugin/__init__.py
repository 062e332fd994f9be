"""verl plugin pieces: they run inside verl's processes (agent loop, reward function, advantage
estimator, config composition, the episode dump), registered through `verl.plugins`."""
