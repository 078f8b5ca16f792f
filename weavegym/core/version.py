"""The package version, read from the installed distribution's metadata (pyproject.toml is the one source)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("weavegym")
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0+unknown"
