"""Repairing broken Unicode with ftfy: mojibake (UTF-8 read as another encoding), HTML entities,
terminal escapes and control characters, with NeMo Curator's choice of fixes."""

from __future__ import annotations

from typing import Literal

import ftfy
from ftfy import TextFixerConfig

from beam_curator.stages.text.modifiers.doc_modifier import DocumentModifier


class UnicodeReformatter(DocumentModifier):
    """Applies ``ftfy.fix_text`` to each document.

    The parameters are ftfy's ``TextFixerConfig`` fields (https://ftfy.readthedocs.io/en/latest/config.html),
    with NeMo Curator's defaults: unlike ftfy's own, they leave ligatures, full-width characters,
    curly quotes and line breaks as they are and apply no Unicode normalization, repairing what is
    broken without rewriting what is merely unusual. ``config``, when given, is used instead of all
    the other parameters.
    """

    def __init__(  # noqa: PLR0913 - one parameter per ftfy setting, as NeMo Curator takes them
        self,
        config: TextFixerConfig | None = None,
        unescape_html: str | bool = "auto",
        remove_terminal_escapes: bool = True,
        fix_encoding: bool = True,
        restore_byte_a0: bool = True,
        replace_lossy_sequences: bool = True,
        decode_inconsistent_utf8: bool = True,
        fix_c1_controls: bool = True,
        fix_latin_ligatures: bool = False,
        fix_character_width: bool = False,
        uncurl_quotes: bool = False,
        fix_line_breaks: bool = False,
        fix_surrogates: bool = True,
        remove_control_chars: bool = True,
        normalization: Literal["NFC", "NFD", "NFKC", "NFKD"] | None = None,
        max_decode_length: int = 1000000,
        explain: bool = True,
    ) -> None:
        super().__init__()
        self.config = config if config is not None else TextFixerConfig(
            unescape_html=unescape_html, remove_terminal_escapes=remove_terminal_escapes, fix_encoding=fix_encoding,
            restore_byte_a0=restore_byte_a0, replace_lossy_sequences=replace_lossy_sequences,
            decode_inconsistent_utf8=decode_inconsistent_utf8, fix_c1_controls=fix_c1_controls,
            fix_latin_ligatures=fix_latin_ligatures, fix_character_width=fix_character_width,
            uncurl_quotes=uncurl_quotes, fix_line_breaks=fix_line_breaks, fix_surrogates=fix_surrogates,
            remove_control_chars=remove_control_chars, normalization=normalization,
            max_decode_length=max_decode_length, explain=explain)

    def modify_document(self, text: str) -> str:
        return ftfy.fix_text(text, config=self.config)
