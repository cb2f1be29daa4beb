"""Fuzzy (MinHash LSH) deduplication kernels: signatures, LSH bands, connected
components. Plain numpy over many documents at once; nothing here knows of Beam."""
