JWT_SECRET = "ops-test-secret-" + "o" * 32
AGENT_SECRET = "agent-client-secret-123"
