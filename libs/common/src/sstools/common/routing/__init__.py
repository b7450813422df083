"""Which tools a message needs: the keyword tier (pure Python, no model) and the hybrid router
that adds an embedding tier when one is given. The router service runs it with its model; the
agent runs the keyword tier alone, in process, when that service cannot be reached."""
