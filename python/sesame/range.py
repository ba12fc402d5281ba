"""Range-query protocols, run in process."""

from ._sesame import Protocol

__all__ = ["Protocol"]
