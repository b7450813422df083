"""The agent's clients of the other services: ops over HTTP, the router and convo over gRPC."""
