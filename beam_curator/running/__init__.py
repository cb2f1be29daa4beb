"""Running a chain of stages: what ``beam_curator.pipeline.run_in_order`` builds on.

``summary`` reads what a run did from Beam's metrics; ``progress`` keeps the
progress folders, draws the live bar and watches for workers that never
start; ``without_metrics`` runs chains where no Beam job reports metrics
(Dask's runner, and ``in_process``: the stage DoFns without Beam); ``lock``
keeps one workflow run per output and cache folder.
"""
