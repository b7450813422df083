from fastapi import FastAPI


def build_app() -> FastAPI:
    # Conversation routes arrive with the conversation-service issue.
    return FastAPI(title="SS-Tools conversations", version="0.1.0")
