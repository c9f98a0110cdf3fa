"""Stage 6, output: renderers, the epoch report, bundles and query output, from result objects."""
