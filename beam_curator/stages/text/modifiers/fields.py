"""Which fields each modifier of a ``Modify`` stage reads and writes, by NeMo Curator's rules.

Inputs: one field for all modifiers, a list of one field per modifier, or a list of field lists (a
modifier given several fields gets each as a keyword argument). Outputs: by default each modifier
writes back to its single input field; a name, or a list of one per modifier (``None`` entries
meaning "in place"), writes elsewhere. In place is refused for a modifier with several inputs, as
there is no one field to write to.
"""

from __future__ import annotations

from typing import Any


def input_fields_per_modifier(input_fields: Any, count: int) -> list[list[str]]:
    """``input_fields`` as one list of field names per modifier."""
    if input_fields is None:
        raise ValueError("input_fields cannot be None")
    if isinstance(input_fields, str):
        return [[input_fields] for _ in range(count)]
    if isinstance(input_fields, list) and all(isinstance(field, str) for field in input_fields):
        groups = [[field] for field in input_fields]
    elif isinstance(input_fields, list) and all(isinstance(group, list) for group in input_fields):
        groups = [list(group) for group in input_fields]
    else:
        raise TypeError(f"input_fields must be a field name, a list of names or a list of name lists: {input_fields!r}")
    if len(groups) == 1:
        return [list(groups[0]) for _ in range(count)]
    if len(groups) != count:
        raise ValueError(
            f"input_fields has {len(groups)} entries for {count} modifier(s): give one, or one per modifier "
            "(a list of lists gives one modifier several fields)")
    return groups


def output_fields_per_modifier(output_fields: Any, inputs: list[list[str]]) -> list[str]:
    """``output_fields`` as one field name per modifier, ``None`` resolved to the single input field."""
    if output_fields is None or isinstance(output_fields, str):
        names = [output_fields] * len(inputs)
    elif isinstance(output_fields, list) and all(name is None or isinstance(name, str) for name in output_fields):
        if len(output_fields) not in (1, len(inputs)):
            raise ValueError(f"output_fields has {len(output_fields)} entries for {len(inputs)} modifier(s): "
                             "give one, or one per modifier")
        names = output_fields * len(inputs) if len(output_fields) == 1 else list(output_fields)
    else:
        raise TypeError(f"output_fields must be a field name, None, or a list of them: {output_fields!r}")
    return [_in_place(fields) if name is None else name for name, fields in zip(names, inputs)]


def _in_place(fields: list[str]) -> str:
    if len(fields) != 1:
        raise ValueError(f"output_fields must be given for a modifier of several input fields {fields}: "
                         "there is no single field to write back to")
    return fields[0]
