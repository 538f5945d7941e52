"""What one request may carry, over HTTP and over MCP alike."""

MAX_BODY = 1_048_576
"""Bytes a request body may hold, unless `create_app` is told otherwise."""
MAX_BATCH = 1_000
"""Messages one save may carry."""
MAX_PAGE = 1_000
"""Items one page may hold."""
