"""Order-preserving and order-revealing encryption schemes."""

from ._sesame import Scheme

__all__ = ["Scheme"]
