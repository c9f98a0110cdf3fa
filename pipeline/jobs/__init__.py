"""Stage 7, jobs: the scheduled `run` and its configuration."""
