"""Fixtures of the security tests."""

from tests.web_support import upstream

__all__ = ["upstream"]
