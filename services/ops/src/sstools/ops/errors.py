"""Typed failures of operations: each carries the HTTP status ops answers with and a stable code
the agent can act on; the message is for people. Task results carry the same body."""

from typing import Any


class OperationError(Exception):
    status = 400
    code = "operation_failed"

    def __init__(self, message: str, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.context = context

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.context}


class NotFound(OperationError):
    status = 404
    code = "not_found"


class Conflict(OperationError):
    status = 409
    code = "conflict"


class UnderMaintenance(Conflict):
    code = "env_under_maintenance"


class InvalidRequest(OperationError):
    status = 422
    code = "invalid_request"
