"""The wheel carries the top-level asset folders inside the package (everything else is in pyproject.toml).

The repository keeps `sql/`, `reports/` and `data-samples/` at its top level; an installed package
cannot see them there, so the build copies them to `pipeline/_data/<folder>`, where
`pipeline/core/paths.py` looks first. An editable install builds nothing here: it reads the folders in place.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ASSET_FOLDERS = ("sql", "reports", "data-samples")  # the same list as pipeline/core/paths.py
# What a local run may leave beside the samples and must not ship (SQLite side files, caches).
NOT_SHIPPED = shutil.ignore_patterns("__pycache__", "*.db-wal", "*.db-shm", "*.db-journal", "*.pyc")
# data-samples/network/: the network mode's sample copies, for a checkout; an installed `run` does not use them.
CHECKOUT_ONLY = Path("data-samples", "network")


def not_shipped(directory, names):
    return NOT_SHIPPED(directory, names) | {n for n in names if Path(directory, n) == CHECKOUT_ONLY}


class BuildPyWithAssets(build_py):
    def run(self):
        super().run()
        if self.editable_mode:
            return
        for folder in ASSET_FOLDERS:
            target = Path(self.build_lib, "pipeline", "_data", folder)
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(folder, target, ignore=not_shipped)


setup(cmdclass={"build_py": BuildPyWithAssets})
