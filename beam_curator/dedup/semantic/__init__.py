"""Semantic deduplication (SemDeDup): cluster embeddings, then within each cluster
score every document by its highest cosine similarity to a document ranked before
it; scores >= 1 - eps mark duplicates.

Modules are plain numpy/torch kernels, callable per cluster, so any engine can
drive them: ``normalize`` (unit vectors), ``kmeans`` (fit on a memory-bounded
sample, assign in parallel; ``kmeans_torch`` and ``kmeans_cuml`` are its engines,
``device`` picks the torch device), ``ranking`` (the single global order that
decides which copy survives), ``pairwise`` (the within-cluster pass),
``cross_cluster`` (comparisons across cluster boundaries) and ``recall``
(brute-force reference and recall measurement on samples).
"""
