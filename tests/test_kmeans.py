"""k-means for semantic dedup: fit (torch, cuML), sampled fit and chunked assignment."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans

from beam_curator.dedup.semantic import kmeans
from beam_curator.dedup.semantic.kmeans import _cuml_usable, assign, fit_kmeans
from beam_curator.dedup.semantic.kmeans_torch import _Lloyd

needs_cuml = pytest.mark.skipif(not _cuml_usable(), reason="needs the cuml package and a CUDA GPU")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU visible to torch")


def blobs(n: int, d: int, n_modes: int, spread: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors around ``n_modes`` random directions, and each row's mode."""
    rng = np.random.default_rng(seed)
    modes = rng.standard_normal((n_modes, d)).astype(np.float32)
    truth = rng.integers(n_modes, size=n)
    x = modes[truth] / np.linalg.norm(modes[truth], axis=1, keepdims=True)
    x += rng.standard_normal((n, d)).astype(np.float32) * np.float32(spread / np.sqrt(d))
    return x / np.linalg.norm(x, axis=1, keepdims=True), truth


def sq_inertia(x: np.ndarray, centroids: np.ndarray) -> float:
    d2 = ((x[:, None, :].astype(np.float64) - centroids[None].astype(np.float64)) ** 2).sum(-1)
    return float(d2.min(1).sum())


def test_same_seed_same_model_other_seed_other_model() -> None:
    x, _ = blobs(1500, 96, 12, spread=1.0)  # d > 64: seeding projects, which must be seeded too
    a = fit_kmeans(x, 10, seed=7, backend="torch", device="cpu")
    b = fit_kmeans(x, 10, seed=7, backend="torch", device="cpu")
    c = fit_kmeans(x, 10, seed=8, backend="torch", device="cpu")
    np.testing.assert_array_equal(a.centroids, b.centroids)
    assert (a.n_iter, a.inertia) == (b.n_iter, b.inertia)
    assert not np.array_equal(a.centroids, c.centroids)
    assert a.centroids.dtype == np.float32 and a.centroids.shape == (10, 96)
    assert a.backend == "torch" and a.n_fit_rows == 1500


def test_recovers_well_separated_clusters() -> None:
    x, truth = blobs(2000, 384, 8, spread=0.3, seed=3)
    model = fit_kmeans(x, 8, backend="torch", device="cpu")
    labels = assign(x, model.centroids).labels
    # Each true cluster lands in exactly one label and no two share one.
    mapping = {t: set(labels[truth == t].tolist()) for t in range(8)}
    assert all(len(found) == 1 for found in mapping.values()), mapping
    assert len({found.pop() for found in mapping.values()}) == 8


def test_inertia_within_two_percent_of_scikit_learn_and_matches_centroids() -> None:
    # More modes than clusters and overlapping noise, so the optimum is not
    # trivial; d > 64 so seeding runs on the principal components. Means over
    # seeds, as single runs of either land in different local optima.
    x, _ = blobs(4000, 128, 40, spread=1.2, seed=5)
    ours = [fit_kmeans(x, 25, seed=seed, backend="torch", device="cpu") for seed in range(3)]
    theirs = [KMeans(n_clusters=25, n_init=1, random_state=seed).fit(x).inertia_ for seed in range(3)]
    assert np.mean([m.inertia for m in ours]) <= 1.02 * np.mean(theirs), ([m.inertia for m in ours], theirs)
    assert ours[0].inertia == pytest.approx(sq_inertia(x, ours[0].centroids), rel=1e-4)


def test_iterations_equal_plain_lloyd_from_the_same_seeds() -> None:
    # Hamerly's bounds skip work but must not change a single label.
    x, _ = blobs(3000, 16, 40, spread=2.0, seed=1)
    centroids = fit_kmeans(x, 30, max_iter=0, backend="torch", device="cpu").centroids.astype(np.float64)
    for _ in range(6):
        labels = ((x[:, None, :] - centroids[None]) ** 2).sum(-1).argmin(1)
        centroids = np.stack([x[labels == j].mean(0) for j in range(30)])
    ours = fit_kmeans(x, 30, max_iter=6, tol=0, backend="torch", device="cpu")
    assert ours.n_iter == 6
    np.testing.assert_allclose(ours.centroids, centroids, atol=1e-5)


def test_tol_stops_early_and_zero_tol_runs_to_max_iter_or_a_fixed_point() -> None:
    x, _ = blobs(1000, 32, 6, spread=0.5, seed=2)
    assert fit_kmeans(x, 6, max_iter=50, tol=1e-4, backend="torch", device="cpu").n_iter < 50
    assert fit_kmeans(x, 6, max_iter=0, backend="torch", device="cpu").n_iter == 0
    hard, _ = blobs(3000, 16, 40, spread=2.0, seed=2)
    assert fit_kmeans(hard, 30, max_iter=3, tol=0, backend="torch", device="cpu").n_iter == 3
    done = fit_kmeans(hard, 30, max_iter=300, tol=0, backend="torch", device="cpu")
    assert done.n_iter < 300
    # A fixed point: every centroid is the mean of the rows assigned to it.
    labels = assign(hard, done.centroids).labels
    means = np.stack([hard[labels == j].mean(0) for j in range(30)])
    np.testing.assert_allclose(done.centroids, means, atol=1e-5)


def test_tiny_byte_budget_fits_a_sample_and_chunked_assign_equals_whole(tmp_path) -> None:
    x, _ = blobs(5000, 32, 10, spread=0.8, seed=4)
    budget = 300 * 32 * 4
    model = fit_kmeans(x, 10, backend="torch", device="cpu", max_sample_bytes=budget)
    assert model.n_fit_rows == 300 and model.centroids.shape == (10, 32)
    # A memmap gives the same sample, so workers may fit straight from disk.
    np.save(tmp_path / "x.npy", x)
    mapped = np.load(tmp_path / "x.npy", mmap_mode="r")
    again = fit_kmeans(mapped, 10, backend="torch", device="cpu", max_sample_bytes=budget)
    np.testing.assert_array_equal(model.centroids, again.centroids)

    whole = assign(x, model.centroids)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. torch's warning about sharing read-only memory
        from_disk = assign(mapped, model.centroids, chunk_rows=1000)
    np.testing.assert_array_equal(from_disk.labels, whole.labels)
    shards = [assign(part, model.centroids, chunk_rows=333) for part in np.array_split(x, 7)]
    for field in ("labels", "second_labels"):
        np.testing.assert_array_equal(np.concatenate([getattr(s, field) for s in shards]), getattr(whole, field))
    for field in ("l2_dist_to_cent", "cosine_dist_to_cent", "second_l2_dist", "second_cosine_dist"):
        got = np.concatenate([getattr(s, field) for s in shards])
        np.testing.assert_allclose(got, getattr(whole, field), rtol=1e-5, atol=1e-6)
    assert whole.labels.dtype == np.int32 and whole.second_labels.dtype == np.int32


def test_byte_budget_below_one_row_per_cluster_is_refused() -> None:
    x, _ = blobs(500, 16, 4, spread=1.0)
    with pytest.raises(ValueError, match=r"holds only 5 rows .* fewer than n_clusters=8.* at least 512 bytes"):
        fit_kmeans(x, 8, backend="torch", device="cpu", max_sample_bytes=5 * 16 * 4)


def test_more_clusters_than_points_is_refused_with_both_numbers() -> None:
    x, _ = blobs(10, 16, 2, spread=1.0)
    with pytest.raises(ValueError, match=r"n_clusters=11 is more than the 10 embeddings.*n_clusters <= 10"):
        fit_kmeans(x, 11, backend="torch", device="cpu")


def test_second_nearest_matches_brute_force() -> None:
    x, _ = blobs(600, 24, 9, spread=1.5, seed=6)
    centroids = fit_kmeans(x, 9, backend="torch", device="cpu").centroids
    got = assign(x, centroids, chunk_rows=100)
    d2 = ((x[:, None, :].astype(np.float64) - centroids[None]) ** 2).sum(-1)
    order = np.argsort(d2, axis=1)
    np.testing.assert_array_equal(got.labels, order[:, 0])
    np.testing.assert_array_equal(got.second_labels, order[:, 1])
    assert np.all(got.labels != got.second_labels)
    assert np.all(got.second_l2_dist >= got.l2_dist_to_cent)
    cos = (x @ centroids.T) / np.linalg.norm(centroids, axis=1)[None]
    rows = np.arange(len(x))
    np.testing.assert_allclose(got.cosine_dist_to_cent, 1 - cos[rows, order[:, 0]], atol=1e-5)
    np.testing.assert_allclose(got.second_cosine_dist, 1 - cos[rows, order[:, 1]], atol=1e-5)
    np.testing.assert_allclose(got.l2_dist_to_cent, np.sqrt(d2[rows, order[:, 0]]), atol=1e-5)


def test_single_centroid_has_no_second() -> None:
    x, _ = blobs(50, 8, 1, spread=1.0)
    got = assign(x, x[:1])
    assert np.all(got.labels == 0) and np.all(got.second_labels == -1)
    assert np.all(np.isinf(got.second_l2_dist)) and np.all(np.isinf(got.second_cosine_dist))


def test_empty_cluster_is_reseeded_at_the_farthest_point() -> None:
    x = torch.tensor([[0.0, 0.0], [0.1, 0.0], [5.0, 0.0], [0.0, 0.2]])
    lloyd = _Lloyd(x, 3)
    # Centroid 2 is far from everything, so it ends up empty.
    lloyd.assign_all(torch.tensor([[0.0, 0.0], [5.0, 0.0], [-100.0, -100.0]]))
    new = lloyd.update()
    # Farthest from its centroid: [0.0, 0.2] (0.2 from [0, 0]).
    np.testing.assert_allclose(new.numpy(), [[1 / 30, 0.2 / 3], [5.0, 0.0], [0.0, 0.2]], atol=1e-6)


def test_fewer_distinct_points_than_clusters_still_fits() -> None:
    x = np.repeat(np.eye(3, 16, dtype=np.float32), 20, axis=0)
    model = fit_kmeans(x, 5, backend="torch", device="cpu")
    assert np.isfinite(model.centroids).all() and model.inertia == pytest.approx(0, abs=1e-6)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.zeros(5, np.float32), "2-D"),
        (np.zeros((5, 3), np.int64), "floating-point"),
        (np.vstack([np.ones((3, 4)), [[np.nan] * 4]]).astype(np.float32), "row 3 .*NaN"),
    ],
)
def test_bad_input_is_refused_clearly(bad: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_kmeans(bad, 2, backend="torch", device="cpu")


def test_assign_refuses_dimension_mismatch() -> None:
    with pytest.raises(ValueError, match="x has 8 dimensions but the centroids have 4"):
        assign(np.ones((3, 8), np.float32), np.ones((2, 4), np.float32))


@pytest.mark.skipif(_cuml_usable(), reason="cuml and a GPU are present, so 'auto' picks cuML")
def test_without_cuml_auto_uses_torch_and_cuml_is_refused() -> None:
    x, _ = blobs(200, 16, 3, spread=1.0)
    assert fit_kmeans(x, 3, backend="auto", device="cpu").backend == "torch"
    with pytest.raises(RuntimeError, match="backend='cuml' needs the cuml package"):
        fit_kmeans(x, 3, backend="cuml")


@pytest.mark.gpu
@needs_cuml
def test_cuml_backend_matches_torch_quality() -> None:
    x, _ = blobs(20000, 384, 50, spread=1.0, seed=9)
    gpu = fit_kmeans(x, 50, backend="cuml")
    again = fit_kmeans(x, 50, backend="cuml")
    cpu = fit_kmeans(x, 50, backend="torch", device="cpu")
    assert gpu.backend == "cuml" and gpu.centroids.shape == (50, 384) and gpu.centroids.dtype == np.float32
    np.testing.assert_allclose(gpu.centroids, again.centroids, atol=1e-4)
    assert gpu.inertia == pytest.approx(sq_inertia(x, gpu.centroids), rel=1e-3)
    assert gpu.inertia <= 1.03 * cpu.inertia


@pytest.mark.gpu
@needs_cuda
def test_torch_on_cuda_matches_cpu() -> None:
    x, _ = blobs(20000, 384, 50, spread=1.0, seed=9)
    gpu = fit_kmeans(x, 50, backend="torch", device="cuda")
    cpu = fit_kmeans(x, 50, backend="torch", device="cpu")
    assert gpu.inertia == pytest.approx(cpu.inertia, rel=0.01)
    on_gpu = assign(x, cpu.centroids, device="cuda")
    on_cpu = assign(x, cpu.centroids, device="cpu")
    assert np.mean(on_gpu.labels == on_cpu.labels) > 0.999
    np.testing.assert_allclose(on_gpu.l2_dist_to_cent, on_cpu.l2_dist_to_cent, atol=1e-4)


def test_module_loads_without_beam_or_gpu_packages() -> None:
    # Loaded as a bare file, so the package's own imports do not count.
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('kmeans_alone', {kmeans.__file__!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules['kmeans_alone'] = module\n"
        "spec.loader.exec_module(module)\n"
        "print([name for name in ('apache_beam', 'cuml', 'cupy') if name in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_gpu_check_script_loads_without_beam() -> None:
    """bench/gpu_check.sh runs on GPU machines that have torch but not Apache
    Beam: its imports (the benches' shared helpers, the kernels) must not
    pull Beam in, as they once did through the machine description."""
    bench = Path(__file__).resolve().parents[1] / "bench"
    code = (
        f"import sys; sys.path.insert(0, {str(bench)!r}); import gpu_check; "
        "print('apache_beam' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_seeding_and_assignment_in_small_blocks_give_the_same_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """k-means|| compares every pool row with every candidate (pool x several
    k distances: 11 GB at k = 3,000 if computed at once) and assignment every
    row with every centroid; both go by blocks of rows. Blocks of a few rows
    must give exactly the centroids and labels of the default blocks."""
    from beam_curator.dedup.semantic import kmeans_seeding

    x, _ = blobs(3000, 24, 40, 0.8, seed=3)
    reference = fit_kmeans(x, 40, max_iter=5, seed=1, backend="torch", device="cpu")
    labels = assign(x, reference.centroids, device="cpu").labels
    monkeypatch.setattr(kmeans_seeding, "_BLOCK_ELEMENTS", 97)
    blocked = fit_kmeans(x, 40, max_iter=5, seed=1, backend="torch", device="cpu")
    np.testing.assert_allclose(blocked.centroids, reference.centroids, rtol=0, atol=1e-6)
    assert np.array_equal(assign(x, reference.centroids, device="cpu", chunk_rows=7).labels, labels)
