"""How a memory runs: operations as steps and their runners, the async bridge, the
registry of plugins and its hook specs, the configuration, and the engine."""
