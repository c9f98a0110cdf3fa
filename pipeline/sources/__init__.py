"""Stage 1, sources: read a host's copies and logs, never write them.

- `store/`: devshard session stores (PostgreSQL, SQLite), the accounting ledger, stored payloads.
- `logs/`: vLLM and validator logs, /metrics scrapes, PoC results (one grammar per format).
- `decode/`: protobuf of the diff log and checkpoints.
"""
