"""The OAuth 2.1 client for MCP servers over HTTP: `OAuth` (the `Auth` hook), how the user agent visits the
authorization server (`LoopbackAuthorizer`, `HeadlessAuthorizer`), and where tokens live
(`MemoryTokenStore`, `FileTokenStore`, or any `TokenStore`)."""

from .authorizers import Authorizer, HeadlessAuthorizer, LoopbackAuthorizer, system_browser
from .flow import OAuth, PreRegistered
from .rules import ClientIdentity, Tokens, client_metadata_document
from .store import FileTokenStore, MemoryTokenStore, TokenStore, default_token_file

__all__ = [
    "Authorizer",
    "ClientIdentity",
    "FileTokenStore",
    "HeadlessAuthorizer",
    "LoopbackAuthorizer",
    "MemoryTokenStore",
    "OAuth",
    "PreRegistered",
    "TokenStore",
    "Tokens",
    "client_metadata_document",
    "default_token_file",
    "system_browser",
]
