"""The character sets datatrove's rules decide with, carried as data.

Both are datatrove 0.10's (``datatrove/utils/text.py``, Apache License 2.0, (c) Hugging Face), so
that a word counts as a symbol, and a line as ending a sentence, exactly when datatrove says so.
``TERMINAL_PUNCTUATION`` is the Unicode ``Sentence_Terminal`` character set; ``SYMBOLS`` is
datatrove's hand-made list of ASCII and CJK punctuation and control characters.
"""

TERMINAL_PUNCTUATION = frozenset(
    "!.?\u0589\u061d\u061e\u061f\u06d4\u0700\u0701\u0702\u07f9\u0837\u0839\u083d\u083e\u0964\u0965"
    "\u104a\u104b\u1362\u1367\u1368\u166e\u1735\u1736\u17d4\u17d5\u17d6\u17d9\u17da\u1803\u1809\u1944"
    "\u1945\u1aa8\u1aa9\u1aaa\u1aab\u1b5a\u1b5b\u1b5e\u1b5f\u1b7d\u1b7e\u1c3b\u1c3c\u1c7e\u1c7f\u203c"
    "\u203d\u2047\u2048\u2049\u2e2e\u2e3c\u2e53\u2e54\u3002\ua4ff\ua60e\ua60f\ua6f3\ua6f7\ua876\ua877"
    "\ua8ce\ua8cf\ua92f\ua9c8\ua9c9\uaa5d\uaa5e\uaa5f\uaaf0\uaaf1\uabeb\ufe52\ufe56\ufe57\uff01\uff0e"
    "\uff1f\uff61\U00010a56\U00010a57\U00010f55\U00010f56\U00010f57\U00010f58\U00010f59\U00010f86"
    "\U00010f87\U00010f88\U00010f89\U00011047\U00011048\U000110be\U000110bf\U000110c0\U000110c1"
    "\U00011141\U00011142\U00011143\U000111c5\U000111c6\U000111cd\U000111de\U000111df\U00011238"
    "\U00011239\U0001123b\U0001123c\U000112a9\U0001144b\U0001144c\U000115c2\U000115c3\U000115c9"
    "\U000115ca\U000115cb\U000115cc\U000115cd\U000115ce\U000115cf\U000115d0\U000115d1\U000115d2"
    "\U000115d3\U000115d4\U000115d5\U000115d6\U000115d7\U00011641\U00011642\U0001173c\U0001173d"
    "\U0001173e\U00011944\U00011946\U00011a42\U00011a43\U00011a9b\U00011a9c\U00011c41\U00011c42"
    "\U00011ef7\U00011ef8\U00011f43\U00011f44\U00016a6e\U00016a6f\U00016af5\U00016b37\U00016b38"
    "\U00016b44\U00016e98\U0001bc9f\U0001da88"
)

SYMBOLS = frozenset(
    "\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\u0008\u000b\u000c\u000d\u000e\u000f\u0010\u0011"
    "\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f!\u0022#$%&'"
    "()*+,-./:;<=>?@[\u005c]^_`{|}~\u007f\u0080\u0081\u0082\u0083\u0084\u0085\u0086\u0087\u0088\u0089"
    "\u008a\u008b\u008c\u008d\u008e\u008f\u0090\u0091\u0092\u0093\u0094\u0095\u0096\u0097\u0098\u0099"
    "\u009a\u009b\u009c\u009d\u009e\u009f\u00ab\u00b4\u00bb\u2013\u2014\u2019\u201c\u201d\u201e\u2026"
    "\u2236\u2501\u25ba\u3001\u3002\u3008\u3009\u300a\u300b\u300c\u300d\u3010\u3011\uff01\uff05\uff08"
    "\uff09\uff0c\uff0e\uff11\uff1a\uff1b\uff1f\uff5e"
) | TERMINAL_PUNCTUATION
