"""Language identification that needs no download (``pip install "beam-curator[langid]"``):
``LanguageIdentifier`` writes each document's language and score, and can keep only some languages.

``identify`` holds the decision between the two models, ``models`` their loading, once per worker.
"""

from beam_curator.stages.text.language.identify import identify_language
from beam_curator.stages.text.language.stage import LanguageIdentifier

__all__ = ["LanguageIdentifier", "identify_language"]
