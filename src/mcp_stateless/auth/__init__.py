"""OAuth 2.1 resource server: bearer tokens checked on every request (JWT against the issuers' JWKS,
opaque tokens by introspection) and the Protected Resource Metadata document that tells clients where
to get them. Needs the ``auth`` extra (joserfc, httpx)."""

from .bearer import BearerAuthenticator, Introspection
from .metadata import protected_resource_metadata, well_known_paths

__all__ = ["BearerAuthenticator", "Introspection", "protected_resource_metadata", "well_known_paths"]
