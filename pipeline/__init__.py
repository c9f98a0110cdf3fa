"""gonka-evidence: reproducible evidence about Gonka devshard hosts.

The package is library first; `pipeline.cli` is a thin Typer layer over it.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gonka-evidence")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+local"
