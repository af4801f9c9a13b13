"""``amplint server``: a language server on stdio (LSP), over the library API.

Needs the optional ``server`` extra (``pip install 'amplint[server]'``: pygls and
lsprotocol); importing this package without them raises ModuleNotFoundError. How to
wire it into an editor: docs/editors.md.
"""

from __future__ import annotations

from amplint.server.app import AmplintServer, create_server, main

__all__ = ["AmplintServer", "create_server", "main"]
