"""The agents' query service: HTTP ``/v1/*`` and MCP (streamable HTTP at ``/mcp``, or
stdio), both over ``query.QueryService``, authenticated by tenant tokens."""
