"""Deterministic sample copies of a devshard host database, with the facts they must yield.

from pipeline.samples import SampleSpec, generate_timeline
tl = generate_timeline(SampleSpec(seed=7))
copy = tl.copy(last_epoch=4)          # epochs 2..4; epoch 4 cut mid-way
copy.write_sqlite(store_dir)          # or copy.write_postgres("postgresql://...")
copy.truth.inferences                 # what an ingest must find
"""

from .host_copy import HostCopy, Truth
from .spec import SampleSpec
from .timeline import Timeline, generate_timeline

__all__ = ["HostCopy", "SampleSpec", "Timeline", "Truth", "generate_timeline"]
