"""Text curation stages at NeMo Curator's import paths (``nemo_curator.stages.text.*`` becomes
``beam_curator.stages.text.*``), so a NeMo pipeline of filters and modifiers ports by changing its
imports. Like every stage, they know nothing of Beam: each call handles a whole ``DocumentBatch``."""
