"""Transport adapters around the core: Streamable HTTP (ASGI) and stdio."""
