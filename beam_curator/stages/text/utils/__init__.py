"""What the text filters and modifiers share: the word, line and paragraph splits, and the
character classes and word lists their decisions rest on."""
