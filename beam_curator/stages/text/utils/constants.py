"""The character classes and word lists behind the heuristic filters' decisions.

They are the values NeMo Curator's filters decide by (its ``stages/text/utils/constants.py``), kept
equal so that a ported pipeline keeps and drops the same documents: a list that differed by one
bullet or one boilerplate phrase would change which documents survive. The lists are data taken
from NVIDIA NeMo Curator (Apache License 2.0).
"""

from __future__ import annotations

import re

import regex

# A sentence ends with one of these (PunctuationFilter): the usual marks and closing quotes.
end_marks = (".", "?", "!", '"', "'")

# What counts as an ellipsis, as a whole word (SymbolsToWordsFilter) or a line's ending (EllipsisFilter).
ellipsis_marks = {"...", "[...]", "\u2026", "(...)", "[\u2026]", "-\u00bb", "read more..", "read more"}

# Lower-case phrases that mark a paragraph as web boilerplate (BoilerPlateStringFilter and
# BoilerPlateStringModifier): policy links and the cookie notices that site builders paste verbatim.
policy_substrings = [
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "privacy overview",
    "use of cookies",
    "use cookies",
    "privacy & cookies policy",
    "privacy and cookies policy",
    *(notice.lower() for notice in (
        "This website uses cookies to improve your experience while you navigate through the website. "
        "Out of these cookies, the cookies that are categorized as necessary are stored on your browser as "
        "they are essential for the working of basic functionalities of the website. We also use third-party "
        "cookies that help us analyze and understand how you use this website. These cookies will be stored "
        "in your browser only with your consent. You also have the option to opt-out of these cookies. But "
        "opting out of some of these cookies may have an effect on your browsing experience.",
        "Necessary cookies are absolutely essential for the website to function properly. This category only "
        "includes cookies that ensures basic functionalities and security features of the website. These "
        "cookies do not store any personal information.",
        "Any cookies that may not be particularly necessary for the website to function and is used "
        "specifically to collect user personal data via analytics, ads, other embedded contents are termed as "
        "non-necessary cookies. It is mandatory to procure user consent prior to running these cookies on "
        "your website.",
        "This site uses cookies, including for analytics, personalization, and advertising purposes. For more "
        "information or to change your cookie settings, click here.",
        "If you continue to browse this site without changing your cookie settings, you agree to this use. "
        "AcceptRead More",
    )),
]

# The characters WhiteSpaceFilter counts (backspace included, other Unicode spaces not).
white_space_list = ["\t", "\n", "\r", "\b", " "]

# The words CommonEnglishWordsFilter counts; lower case on purpose, so that shouting text scores low.
common_english_words = {"the", "be", "to", "of", "and", "that", "have", "with"}

# Line openers that BulletsFilter counts as bullets.
bullet_list = {
    "\u2022", "\u2023", "\u2043", "\u204c", "\u204d", "\u2219",
    "\u25cb", "\u25cf", "\u25d8", "\u25e6", "\u29be", "\u29bf",
}

# Unicode's Alphabetic property (POSIX [[:alpha:]] in the ``regex`` module): wider than
# ``str.isalpha``, it also takes combining vowel signs, so a Hindi word of one letter and a sign counts.
regex_alpha = regex.compile("[[:alpha:]]")
# ASCII digits only: ``regex``'s POSIX [[:digit:]] is 0-9, not every Unicode decimal.
regex_digit = re.compile("[0-9]")
# What NonAlphaNumericFilter does not count against a document: ASCII letters and digits, newlines
# and ordinary sentence punctuation.
regex_alphanum = re.compile("[a-zA-Z0-9\n?!,.]")
# An http(s) URL: letters, digits, the punctuation URLs use and %-escapes. The hyphen is a literal,
# so a match stops at the first character a URL cannot hold, such as "<" or ";".
regex_url = re.compile(r"https?://(?:[A-Za-z0-9$\-_@.&+/:=?#~!*(),]|%[0-9A-Fa-f]{2})+")
# Each bracket of any kind is one character "in parentheses" for ParenthesesFilter.
regex_paren = re.compile(r"[{}\u27e8\u27e9\[\]()]")
# Runs of "#": SymbolsToWordsFilter counts a word that is mostly hashes as a symbol.
regex_hash = re.compile("#+")
