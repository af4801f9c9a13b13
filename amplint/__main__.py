import os
import sys

# `python -m amplint` puts the current directory first on sys.path, where a project's own
# `tokenize.py` (URLBERT's, round BF) would shadow the standard library module of that name
# and crash amplint before it lints anything. amplint itself is already imported by now.
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from amplint.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
