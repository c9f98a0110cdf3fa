#!/usr/bin/env bash
# Regenerate devshard_pb2.py from devshard.proto (needs the dev extra: grpcio-tools).
set -euo pipefail
cd "$(dirname "$0")"
python -m grpc_tools.protoc -I. --python_out=. --pyi_out=. devshard.proto snapshot.proto
