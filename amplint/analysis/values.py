"""What an expression is statically known to be: one of a few strings, or dtypes.

Only what is certain counts: a literal, a torch dtype attribute, a name bound exactly
once in scope to such a thing, a conditional expression of them, or a lookup in a
literal dict. Everything else is unknown (None), and rules stay silent on unknowns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from amplint.analysis.bindings import Bindings
from amplint.analysis.names import NameResolver
from amplint.analysis.torch_api import DTYPE_ALIASES

_MAX_DEPTH = 8


@dataclass(eq=False)
class Values:
    """Static values of expressions (``context.analysis.values``)."""

    names: NameResolver
    bindings: Bindings

    def string_values(self, node: cst.BaseExpression, depth: int = 0) -> frozenset[str] | None:
        """The possible string values of ``node``, or None when not statically known."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, cst.SimpleString):
            value = node.evaluated_value
            return frozenset({value}) if isinstance(value, str) else None
        if isinstance(node, (cst.IfExp, cst.Name)):
            return self._through(node, depth, self.string_values)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict):
            # {"gpu": "cuda", "cpu": "cpu"}[accelerator]: the chosen value when the key is
            # known, else any of them.
            entries = self._entries(node.value, depth, self.string_values)
            if not entries:
                return None
            table: dict[str | None, frozenset[str]] = {}
            for key, found in entries:
                table[key] = table.get(key, frozenset()) | found
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
        if isinstance(node, (cst.IfExp, cst.Name)):
            return self._through(node, depth, self.dtype_values)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Dict):
            # {'float16': torch.float16, 'bfloat16': torch.bfloat16}[dtype]: any of the values.
            entries = self._entries(node.value, depth, self.dtype_values)
            if entries is None:
                return None
            keys = self._lookup_keys(node)
            if keys is not None:
                chosen = frozenset(value for key, found in entries if key in keys for value in found)
                if chosen:
                    return chosen
            return frozenset(value for _, found in entries for value in found)
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

    def _through(
        self, node: cst.IfExp | cst.Name, depth: int, evaluate: Callable[[cst.BaseExpression, int], frozenset[str] | None]
    ) -> frozenset[str] | None:
        """The values of either branch of a conditional, or of what a name is bound to once."""
        if isinstance(node, cst.IfExp):
            body, orelse = evaluate(node.body, depth + 1), evaluate(node.orelse, depth + 1)
            return body | orelse if body is not None and orelse is not None else None
        bound = self.bindings.single_value(node)
        return evaluate(bound, depth + 1) if bound is not None else None

    def _entries(
        self, table: cst.Dict, depth: int, evaluate: Callable[[cst.BaseExpression, int], frozenset[str] | None]
    ) -> list[tuple[str | None, frozenset[str]]] | None:
        """Each entry of a literal dict: its key (None unless a string literal) and the
        values ``evaluate`` finds for it; None when a value is unknown or the dict unpacks."""
        entries: list[tuple[str | None, frozenset[str]]] = []
        for element in table.elements:
            if not isinstance(element, cst.DictElement):
                return None
            found = evaluate(element.value, depth + 1)
            if found is None:
                return None
            key = element.key.evaluated_value if isinstance(element.key, cst.SimpleString) else None
            entries.append((key if isinstance(key, str) else None, found))
        return entries

    def _lookup_keys(self, node: cst.Subscript) -> frozenset[str] | None:
        if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
            return None
        return self.string_values(node.slice[0].slice.value)
