from fastapi import FastAPI


def build_app() -> FastAPI:
    # Auth, RBAC and the operations arrive with the operations-API issue.
    return FastAPI(title="SS-Tools operations", version="0.1.0")
