"""The read worker of a large (re)index: reads and parses files while the indexing process
writes them into the index (see :class:`brainmap.indexer._Readers`)."""

from brainmap.indexer import serve_reads

if __name__ == "__main__":
    serve_reads()
