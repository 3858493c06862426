"""The /v1 error: OpenAI's body (``{"error": {message, type, param, code}}``) and its HTTP status."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    def __init__(
        self, status: int, message: str, code: str, kind: str = "invalid_request_error", param: str | None = None,
        **headers: str,
    ):
        super().__init__(message)
        self.status, self.message, self.code, self.kind, self.headers = status, message, code, kind, headers
        self.param = param  # the request field at fault, as OpenAI names it

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}
