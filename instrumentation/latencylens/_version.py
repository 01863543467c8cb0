"""The package version, in its own module so internals can read it without importing the API."""

__version__ = "0.1.0"
