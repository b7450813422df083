"""REST edge: the operations the agent's tools perform, under the caller's own identity."""
