"""Serving an index: the HTTP API and web page (``app.py``) and the MCP tools for agents (``mcp.py``)."""
