"""Stage 9, the command line: thin Typer commands over `pipeline.api`; the only layer that prints.

Empty on purpose: the console script (`pipeline.cli.main`) imports the commands inside its Ctrl-C handler.
"""
