"""gRPC edge for the agent: ConversationService over the store."""
