"""The browser mode over textual-serve (issue 8)."""
