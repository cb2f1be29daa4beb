"""Beam adapters: stages as DoFns and PTransforms."""

from beam_curator.transforms.curator_stages import CuratorStages, locate_source_and_sink
from beam_curator.transforms.dedup_documents import DedupOutputs
from beam_curator.transforms.exact_dedup import ExactDedup
from beam_curator.transforms.filter_documents import FilterDocuments, FilterOutputs
from beam_curator.transforms.fuzzy_dedup import FuzzyDedup
from beam_curator.transforms.language import IdentifyLanguage, SplitByLanguage
from beam_curator.transforms.refusals import PipelineChangedError, PipelineDefinitionError
from beam_curator.transforms.semantic_dedup import SemanticDedup
from beam_curator.transforms.surviving_representatives import SurvivingRepresentatives
from beam_curator.transforms.task_coder import TaskCoder  # importing it registers it for every Task PCollection

__all__ = [
    "CuratorStages",
    "DedupOutputs",
    "ExactDedup",
    "FilterDocuments",
    "FilterOutputs",
    "FuzzyDedup",
    "IdentifyLanguage",
    "PipelineChangedError",
    "PipelineDefinitionError",
    "SemanticDedup",
    "SplitByLanguage",
    "SurvivingRepresentatives",
    "TaskCoder",
    "locate_source_and_sink",
]
