"""The package's version, in a leaf module any layer may import (the stores write it in exports)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
