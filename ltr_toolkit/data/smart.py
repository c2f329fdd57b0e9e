"""Records of the SMART format classic IR test collections are shipped in (Cranfield,
CACM, CISI, MED, ...): ``.I id`` starts a record, a line ``.X`` (one capital letter)
starts its field X, the lines below it are the field's text."""

from __future__ import annotations

import re

_FIELD = re.compile(r"^\.([A-Z])\s*$")


def records(text: str):
    """Yield (id, {field letter: text, whitespace collapsed}) per ``.I`` record."""
    for block in re.split(r"^\.I\s+", text, flags=re.M)[1:]:
        head, _, rest = block.partition("\n")
        fields: dict[str, list[str]] = {}
        current = None
        for line in rest.splitlines():
            m = _FIELD.match(line)
            if m:
                current = m.group(1)
                fields.setdefault(current, [])
            elif current:
                fields[current].append(line)
        yield head.strip(), {k: " ".join(" ".join(v).split()) for k, v in fields.items()}
