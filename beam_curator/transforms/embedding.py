"""Document embedding as a stage, through Beam's RunInference.

RunInference sees one example per DocumentBatch (its list of texts), so the
batches keep their lineage and stay fused with the rest of the pipeline;
the engine embeds all texts of the tasks it is given, batching as it likes.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.ml.inference.base import KeyedModelHandler, ModelHandler, RunInference

from beam_curator.tasks import DocumentBatch
from beam_curator.transforms.transform_stage import TransformStage


class _TextListHandler(ModelHandler[list, np.ndarray, Any]):
    """Adapts a handler of single texts (returning ``PredictionResult``s) to
    examples that are lists of texts, returning one (n, dim) array per list."""

    def __init__(self, text_handler: ModelHandler) -> None:
        super().__init__()
        self.text_handler = text_handler

    def load_model(self) -> Any:
        return self.text_handler.load_model()

    def share_model_across_processes(self) -> bool:
        return self.text_handler.share_model_across_processes()

    def model_copies(self) -> int:
        return self.text_handler.model_copies()

    def batch_elements_kwargs(self) -> dict[str, Any]:
        return {"min_batch_size": 1, "max_batch_size": 1}

    def run_inference(self, batch: Sequence[list], model: Any, inference_args=None) -> Iterable[np.ndarray]:
        flat = [text for texts in batch for text in texts]
        results = list(self.text_handler.run_inference(flat, model, inference_args)) if flat else []
        vectors = [result.inference for result in results]
        out, start = [], 0
        for texts in batch:
            out.append(np.asarray(vectors[start : start + len(texts)], dtype=np.float32).reshape(len(texts), -1))
            start += len(texts)
        return out

    def get_num_bytes(self, batch: Sequence[list]) -> int:
        return sum(len(text) for texts in batch for text in texts)


class EmbeddingStage(TransformStage):
    """Adds an ``embedding`` column (list<float32>) computed from ``text_field``."""

    name = "embedding"

    def __init__(self, handler: ModelHandler, text_field: str = "text", embedding_field: str = "embeddings") -> None:
        self.handler = handler
        self.text_field = text_field
        self.embedding_field = embedding_field

    def transform(self) -> beam.PTransform:
        text_field, embedding_field = self.text_field, self.embedding_field

        def keyed_texts(task: DocumentBatch) -> tuple[DocumentBatch, list[str]]:
            return task, task.to_pyarrow().column(text_field).to_pylist()

        def attach(pair) -> tuple[DocumentBatch, DocumentBatch]:
            task, vectors = pair  # _TextListHandler yields one (n, dim) array per task
            column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), vectors.shape[1]) \
                if len(vectors) else pa.array([], pa.list_(pa.float32()))
            table = task.to_pyarrow().append_column(embedding_field, column)
            result = DocumentBatch(dataset_name=task.dataset_name, data=table)
            result._metadata = dict(task._metadata)
            return task, result

        return (
            "Texts" >> beam.Map(keyed_texts)
            | "Embed" >> RunInference(KeyedModelHandler(_TextListHandler(self.handler)))
            | "Attach" >> beam.Map(attach)
        )
