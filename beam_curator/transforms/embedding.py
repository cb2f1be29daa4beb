"""Document embedding as a stage, through Beam's RunInference.

RunInference sees one example per DocumentBatch (its list of texts), so the
batches keep their lineage and stay fused with the rest of the pipeline;
the engine embeds all texts of the tasks it is given, batching as it likes.
A text that occurs several times in a batch is embedded once and its vector
copied to each row: dumps, mirrors and templated records repeat texts, and
so do the documents a verify cascade embeds again (on the Debian corpus,
about one in seven of them at the default screening_eps). Run without Beam
(``runner="in-process"``), the stage loads the model itself in ``setup`` and
embeds each task's texts in ``process``, through the same handler.

Beam's inference module imports torch and scipy, so it is imported only when
the pipeline is built: a run that finds every partition done never pays for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from beam_curator.tasks import DocumentBatch, Task
from beam_curator.transforms.progress import advance
from beam_curator.transforms.transform_stage import TransformStage

if TYPE_CHECKING:
    from apache_beam.ml.inference.base import ModelHandler

    from beam_curator.models.base import TextListHandler


class EmbeddingStage(TransformStage):
    """Adds an ``embedding`` column (list<float32>) computed from ``text_field``.

    ``handler`` embeds single texts (a ``ModelHandler`` such as
    :func:`~beam_curator.models.make_embedding_handler` returns), or is a
    function without arguments that makes one when the pipeline is built.
    """

    name = "embedding"

    def __init__(
        self, handler: ModelHandler | Callable[[], ModelHandler], text_field: str = "text",
        embedding_field: str = "embeddings",
    ) -> None:
        self.handler = handler
        self.text_field = text_field
        self.embedding_field = embedding_field

    def transform(self) -> beam.PTransform:
        from apache_beam.ml.inference.base import KeyedModelHandler, RunInference

        text_field, embedding_field = self.text_field, self.embedding_field
        return (
            "Texts" >> beam.Map(lambda task: distinct_texts(task, text_field))
            | "Embed" >> RunInference(KeyedModelHandler(self._text_lists()))
            | "Attach" >> beam.Map(lambda pair: (pair[0][0], with_vectors(*pair[0], pair[1], embedding_field)))
        )

    def setup(self) -> None:
        """Only where the stage runs without Beam (``runner="in-process"``), which calls ``process``."""
        self._engine = self._text_lists()
        self._model = self._engine.load_model()

    def process(self, task: Task) -> DocumentBatch:
        """The stage without RunInference: the model loaded in ``setup`` embeds the task's texts."""
        (task, rows), texts = distinct_texts(task, self.text_field)
        (vectors,) = self._engine.run_inference([texts], self._model)
        return with_vectors(task, rows, vectors, self.embedding_field)

    def teardown(self) -> None:
        self._engine = self._model = None

    def _text_lists(self) -> TextListHandler:
        from apache_beam.ml.inference.base import ModelHandler

        from beam_curator.models.base import TextListHandler

        handler = self.handler if isinstance(self.handler, ModelHandler) else self.handler()
        return TextListHandler(handler, advance)


def distinct_texts(task: Task, text_field: str) -> tuple[tuple[Task, np.ndarray], list[str]]:
    """The task and, per row, its text's place among the distinct texts; the distinct texts."""
    texts = task.to_pyarrow().column(text_field).combine_chunks()
    distinct = pc.dictionary_encode(texts, null_encoding="encode")
    if len(texts) > len(distinct.dictionary):
        advance(len(texts) - len(distinct.dictionary))  # copies: embedded as their first occurrence is
    return (task, distinct.indices.to_numpy()), distinct.dictionary.to_pylist()


def with_vectors(task: Task, rows: np.ndarray, vectors: np.ndarray, embedding_field: str) -> DocumentBatch:
    """``task`` with each row's vector (``vectors`` holds one per distinct text) in ``embedding_field``."""
    vectors = vectors[rows] if len(rows) else vectors
    column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), vectors.shape[1]) \
        if len(vectors) else pa.array([], pa.list_(pa.float32()))
    table = task.to_pyarrow().append_column(embedding_field, column)
    result = DocumentBatch(dataset_name=task.dataset_name, data=table)
    result._metadata = dict(task._metadata)
    return result
