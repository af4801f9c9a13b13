"""The engine: files in, diagnostics and fixed files out. It knows no rule by name."""
