"""Decoders for devshard blobs: the protobuf diff log, bitmaps and JSON columns."""
