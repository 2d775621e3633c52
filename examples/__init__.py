"""Examples of agents built on steadyloop, each with its tests (run in CI)."""
