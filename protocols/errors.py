"""The protocol's errors: EdgeError, the UE's (the edge answered ERROR, or a reply breaks the protocol),
ProtocolError, the edge's (a well-formed message that is wrong for the session's state), and WireError, either
side's (a message that cannot be encoded or decoded; protocols/schema.py)."""
from __future__ import annotations


class EdgeError(RuntimeError):
    """The edge answered with an ERROR message (``code``: its code, when it came from one)."""

    def __init__(self, text: str, code: str | None = None):
        super().__init__(text)
        self.code = code


class ProtocolError(ValueError):
    """A well-formed message that is wrong for the session's state; .code names the problem."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class WireError(ValueError):
    """A message that cannot be encoded or decoded; .code is a short machine-readable reason."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
