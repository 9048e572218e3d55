"""The sans-IO protocol core: pure rules, no sockets, no event loop, no globals."""
