"""The `doctor` task (report): what a source holds, and with a warehouse what that warehouse found about it."""
