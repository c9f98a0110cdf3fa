"""Log and result files of one host: one grammar per format."""
