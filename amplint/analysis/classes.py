"""What a class holds across its methods: every value each attribute is assigned.

Training code keeps its AMP state on ``self``: the scaler is built in ``__init__``, the
autocast opened in ``train_step``, the dtype read from ``self.config``. A *member* of a
class is an assignment to ``self.<attr>`` in any of its methods (``self`` being the
method's first parameter, nested functions included), or a class-body assignment or
annotation (``dtype = torch.bfloat16``, a dataclass field ``device: torch.device``).

``attribute_values(cls, attr)`` answers only when every member of that name is a plain
assignment: an augmented assignment, an unpacking that cannot be matched element by
element, or an annotation without a value (set by the constructor) makes the values
unknown (None), and rules stay silent.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst

from amplint.analysis.syntax import dotted_name
from amplint.analysis.tree import Tree


@dataclass(frozen=True)
class Member:
    """One assignment (or declaration) of an attribute of a class."""

    target: cst.CSTNode  # the `self.attr` or class-body name
    value: cst.BaseExpression | None  # None: not a plain assignment, or a bare declaration
    declaration: bool = False  # `attr: T` in the class body


@dataclass(eq=False)
class Classes:
    """Class members of one file (``context.analysis.classes``)."""

    tree: Tree

    def methods(self, cls: cst.ClassDef) -> list[cst.FunctionDef]:
        body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
        return [statement for statement in body if isinstance(statement, cst.FunctionDef)]

    def self_name(self, method: cst.FunctionDef) -> str | None:
        """The name a method calls its instance (None for static and class methods)."""
        for decorator in method.decorators:
            target = decorator.decorator
            if isinstance(target, cst.Name) and target.value in ("staticmethod", "classmethod"):
                return None
        params = method.params.posonly_params or method.params.params
        return params[0].name.value if params else None

    def method_of(self, node: cst.CSTNode) -> tuple[cst.ClassDef, cst.FunctionDef] | None:
        """The class and method whose code runs ``node`` (through nested functions)."""
        function: cst.FunctionDef | None = None
        for child, ancestor in self.tree.ancestry(node):
            if isinstance(ancestor, cst.FunctionDef) and child is ancestor.body:
                function = ancestor
            elif isinstance(ancestor, cst.ClassDef):
                owner = self.tree.class_of(function) if function is not None else None
                return (ancestor, function) if owner is ancestor and function is not None else None
        return None

    def instance_attribute(self, node: cst.CSTNode) -> tuple[cst.ClassDef, str] | None:
        """For ``self.attr`` inside a method: (the class, ``attr``)."""
        if not isinstance(node, cst.Attribute) or not isinstance(node.value, cst.Name):
            return None
        found = self.method_of(node)
        if found is None:
            return None
        cls, method = found
        return (cls, node.attr.value) if self.self_name(method) == node.value.value else None

    @functools.cached_property
    def _members(self) -> dict[cst.ClassDef, dict[str, list[Member]]]:
        table: dict[cst.ClassDef, dict[str, list[Member]]] = {cls: {} for cls in self.tree.index.classes}

        def add(cls: cst.ClassDef, attr: str, member: Member) -> None:
            table[cls].setdefault(attr, []).append(member)

        for cls in self.tree.index.classes:
            body = cls.body.body if isinstance(cls.body, cst.IndentedBlock) else ()
            for statement in body:
                if not isinstance(statement, cst.SimpleStatementLine):
                    continue
                for small in statement.body:
                    if isinstance(small, cst.Assign):
                        for target in small.targets:
                            if isinstance(target.target, cst.Name):
                                value = small.value if len(small.targets) == 1 else None
                                add(cls, target.target.value, Member(target.target, value))
                    elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                        add(cls, small.target.value, Member(small.target, small.value, declaration=small.value is None))
        for assign in self.tree.index.assigns:
            for target in assign.targets:
                for element, value in _pairs(target.target, assign.value if len(assign.targets) == 1 else None):
                    found = self.instance_attribute(element)
                    if found is not None:
                        add(found[0], found[1], Member(element, value))
        for annotated in self.tree.index.annotated:
            found = self.instance_attribute(annotated.target)
            if found is not None:
                add(found[0], found[1], Member(annotated.target, annotated.value, declaration=annotated.value is None))
        for augmented in self.tree.index.augmented:
            found = self.instance_attribute(augmented.target)
            if found is not None:
                add(found[0], found[1], Member(augmented.target, None))
        return table

    def members(self, cls: cst.ClassDef, attr: str) -> list[Member]:
        return self._members.get(cls, {}).get(attr, [])

    def attribute_values(self, cls: cst.ClassDef, attr: str) -> list[cst.BaseExpression] | None:
        """Every value ``attr`` is assigned in ``cls``, when each assignment is plain; for
        a read-only ``@property`` of that name, every value its ``return``s give
        (efficientvit's ``amp_dtype`` returns a dtype on an if/elif chain)."""
        members = self.members(cls, attr)
        if not members:
            prop = next((m for m in self.methods(cls) if m.name.value == attr and _is_property(m)), None)
            returned = _returned_values(prop) if prop is not None else []
            if not returned or any(value is None for value in returned):
                return None
            return [value for value in returned if value is not None]
        # `self.device: str` in a method only annotates (CellViT-plus-plus declares it, then
        # sets `self.device = f"cuda:{gpu}"`); a class-body field may be filled by the caller.
        members = [m for m in members if not (m.declaration and isinstance(m.target, cst.Attribute))]
        if not members or any(member.value is None for member in members):
            return None
        return [member.value for member in members if member.value is not None]

    def assigned_from_outside(self, spelled: str) -> bool:
        """Does the file assign the attribute spelled ``config.dtype`` directly?"""
        return assigns_attribute(self.tree, spelled)

    def module_classes(self) -> list[cst.ClassDef]:
        return [statement for statement in self.tree.source.module.body if isinstance(statement, cst.ClassDef)]

    def attribute_names(self, cls: cst.ClassDef) -> list[str]:
        """The attributes a class assigns or declares, and its read-only properties."""
        names = list(self._members.get(cls, {}))
        names += [m.name.value for m in self.methods(cls) if _is_property(m) and m.name.value not in names]
        return names

    def class_named(self, name: str) -> cst.ClassDef | None:
        """The one class of the file called ``name`` (None if none, or several)."""
        found = [cls for cls in self.tree.index.classes if cls.name.value == name]
        return found[0] if len(found) == 1 else None

    def construction_values(self, construction: cst.Call, attr: str) -> list[cst.BaseExpression] | None:
        """The values ``attr`` can have on an object built by ``construction``, a call of a
        class of this file: its members, and a keyword argument of that name (a dataclass
        field set by the constructor). None when unknown, or the call passes positional
        or unpacked arguments that may set it."""
        if not isinstance(construction.func, cst.Name):
            return None
        cls = self.class_named(construction.func.value)
        if cls is None:
            return None
        values = list(self.attribute_values(cls, attr) or [])
        if not values and not self.members(cls, attr):
            return None
        for arg in construction.args:
            if arg.star or arg.keyword is None:
                return None
            if arg.keyword.value == attr:
                values.append(arg.value)
        if any(member.declaration for member in self.members(cls, attr)):
            # A field without a default: known only when every construction sets it.
            if not any(arg.keyword is not None and arg.keyword.value == attr for arg in construction.args):
                return None
            values = [arg.value for arg in construction.args if arg.keyword is not None and arg.keyword.value == attr]
        elif self.attribute_values(cls, attr) is None:
            return None
        return values

def assigns_attribute(tree: Tree, spelled: str) -> bool:
    """Does the file assign the attribute spelled ``config.dtype`` (or ``ModelArgs.device``)
    directly: plainly, annotated, augmented, or as a part of an unpacking?"""
    targets = [target.target for assign in tree.index.assigns for target in assign.targets]
    targets += [node.target for node in tree.index.annotated]
    targets += [node.target for node in tree.index.augmented]
    return any(dotted_name(element) == spelled for target in targets for element, _ in _pairs(target, None))


def _pairs(
    target: cst.BaseExpression, value: cst.BaseExpression | None
) -> list[tuple[cst.BaseExpression, cst.BaseExpression | None]]:
    """Assignment targets with the value each receives (unpacking matched element-wise
    when the right-hand side is a display of the same length; None when unknown)."""
    if isinstance(target, (cst.Tuple, cst.List)):
        values: list[cst.BaseExpression | None] = [None] * len(target.elements)
        if (
            isinstance(value, (cst.Tuple, cst.List))
            and len(value.elements) == len(target.elements)
            and not any(isinstance(element, cst.StarredElement) for element in (*target.elements, *value.elements))
        ):
            values = [element.value for element in value.elements]
        pairs: list[tuple[cst.BaseExpression, cst.BaseExpression | None]] = []
        for element, element_value in zip(target.elements, values, strict=True):
            pairs.extend(_pairs(element.value, element_value))
        return pairs
    return [(target, value)]


def _is_property(method: cst.FunctionDef) -> bool:
    """A read-only ``@property`` (a property with a setter may hold anything)."""
    return any(isinstance(d.decorator, cst.Name) and d.decorator.value == "property" for d in method.decorators)


def _returned_values(method: cst.FunctionDef) -> list[cst.BaseExpression | None]:
    """What the method's own ``return`` statements return (nested functions excluded); a
    bare ``return`` or falling off the end is None, which makes the values unknown."""
    found: list[cst.BaseExpression | None] = []

    def visit(node: cst.CSTNode) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not method:
            return
        if isinstance(node, cst.Return):
            found.append(node.value)
            return
        for child in node.children:
            visit(child)

    visit(method.body)
    body = method.body.body if isinstance(method.body, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    ends_returning = isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], (cst.Return, cst.Raise))
    if isinstance(last, cst.If):
        ends_returning = _always_returns(last)
    if not ends_returning:
        found.append(None)
    return found


def _always_returns(statement: cst.If) -> bool:
    """Does every branch of an ``if``/``elif``/``else`` chain end in ``return`` or ``raise``?"""
    branch: cst.If | cst.Else | None = statement
    while isinstance(branch, cst.If):
        if not _block_returns(branch.body):
            return False
        branch = branch.orelse
    return isinstance(branch, cst.Else) and _block_returns(branch.body)


def _block_returns(suite: cst.BaseSuite) -> bool:
    body = suite.body if isinstance(suite, cst.IndentedBlock) else ()
    last = body[-1] if body else None
    if isinstance(last, cst.If):
        return _always_returns(last)
    if isinstance(suite, cst.SimpleStatementSuite):
        return isinstance(suite.body[-1], (cst.Return, cst.Raise))
    return isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], (cst.Return, cst.Raise))
