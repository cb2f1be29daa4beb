"""Fuzzy (MinHash LSH) deduplication kernels: signatures, LSH bands, connected
components. numpy over many documents at once (the MinHash kernel compiled by numba);
nothing here knows of Beam."""
