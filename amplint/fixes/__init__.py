"""The fix toolkit rules build their fixes with: text edits and an importer.

``edits``: line-level edits (move, re-indent, remove a statement) and the small libcst
pieces fixes assemble calls from. ``importer``: make a module name usable where a fix
emits it, and remove an import binding that a fix left unused (in the manner of Ruff's
Importer). Fixes never emit a name that is not bound at the use site.
"""
