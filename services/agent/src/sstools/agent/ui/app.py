from fastapi import FastAPI


def build_app() -> FastAPI:
    # The Gradio /chat interface is mounted here by the agent-service issue.
    return FastAPI(title="SS-Tools agent", version="0.1.0")
