"""What an expression is statically known to be: one of a few strings, or dtypes.

Only what is certain counts: a literal, a torch dtype attribute, a name bound exactly
once in scope to such a thing, a conditional expression of them, or a lookup in a
literal dict. Everything else is unknown (None), and rules stay silent on unknowns.
"""

from __future__ import annotations

import libcst as cst

from amplint.analysis.bindings import Bindings
from amplint.analysis.names import NameResolver
from amplint.analysis.torch_api import DTYPE_ALIASES

_MAX_DEPTH = 8


class Values:
    """Static values of expressions (``context.analysis.values``)."""

    def __init__(self, names: NameResolver, bindings: Bindings) -> None:
        self.names = names
        self.bindings = bindings

    def string_values(self, node: cst.BaseExpression, depth: int = 0) -> frozenset[str] | None:
        """The possible string values of ``node``, or None when not statically known."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            return frozenset({value}) if isinstance(value, str) else None
        if isinstance(node, cst.IfExp):
            body, orelse = self.string_values(node.body, depth + 1), self.string_values(node.orelse, depth + 1)
            return body | orelse if body is not None and orelse is not None else None
        if isinstance(node, cst.Name):
            bound = self.bindings.single_value(node)
            return self.string_values(bound, depth + 1) if bound is not None else None
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict):
            # {"gpu": "cuda", "cpu": "cpu"}[accelerator]: the chosen value when the key is
            # known, else any of them.
            table: dict[str | None, frozenset[str]] = {}
            for element in node.value.elements:
                if not isinstance(element, cst.DictElement):
                    return None
                found = self.string_values(element.value, depth + 1)
                if found is None:
                    return None
                key = element.key.evaluated_value if isinstance(element.key, cst.SimpleString) else None
                table[key if isinstance(key, str) else None] = table.get(key if isinstance(key, str) else None, frozenset()) | found
            if not table:
                return None
            keys = self._lookup_keys(node)
            if keys is not None and None not in table and keys <= table.keys():
                return frozenset().union(*(table[key] for key in keys))
            return frozenset().union(*table.values())
        return None

    def dtype_values(self, node: cst.BaseExpression, depth: int = 0) -> frozenset[str] | None:
        """The possible dtypes of ``node`` (canonical names like ``float16``), or None."""
        if depth > _MAX_DEPTH:
            return None
        qualified = self.names.resolve(node)
        if qualified is not None and qualified.startswith("torch."):
            alias = DTYPE_ALIASES.get(qualified.removeprefix("torch."))
            return frozenset({alias}) if alias else None
        if isinstance(node, cst.IfExp):
            body, orelse = self.dtype_values(node.body, depth + 1), self.dtype_values(node.orelse, depth + 1)
            return body | orelse if body is not None and orelse is not None else None
        if isinstance(node, cst.Name):
            bound = self.bindings.single_value(node)
            return self.dtype_values(bound, depth + 1) if bound is not None else None
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict):
            # {'float16': torch.float16, 'bfloat16': torch.bfloat16}[dtype]: any of the values.
            values: set[str] = set()
            for element in node.value.elements:
                if not isinstance(element, cst.DictElement):
                    return None
                found = self.dtype_values(element.value, depth + 1)
                if found is None:
                    return None
                values |= found
            keys = self._lookup_keys(node)
            if keys is not None:
                chosen = {
                    value
                    for element in node.value.elements
                    if isinstance(element, cst.DictElement)
                    and isinstance(element.key, cst.SimpleString)
                    and element.key.evaluated_value in keys
                    for value in (self.dtype_values(element.value, depth + 1) or ())
                }
                if chosen:
                    return frozenset(chosen)
            return frozenset(values)
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and node.func.value == "getattr"
            and len(node.args) == 2
            and self.names.resolve(node.args[0].value) == "torch"
        ):
            # getattr(torch, "bfloat16")
            names = self.string_values(node.args[1].value, depth + 1)
            if names is not None and all(name in DTYPE_ALIASES for name in names):
                return frozenset(DTYPE_ALIASES[name] for name in names)
        return None

    def _lookup_keys(self, node: cst.Subscript) -> frozenset[str] | None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return None
        return self.string_values(node.slice[0].slice.value)
