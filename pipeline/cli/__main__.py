"""`python -m pipeline.cli`: the `gonka-evidence` console script."""

from pipeline.cli.main import main

main()
