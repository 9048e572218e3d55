"""`mcp-stateless login URL`: authorize this machine's user for a protected MCP server and keep the token.

A one-shot listener on 127.0.0.1 receives the authorization server's redirect (RFC 8252 loopback
redirect); the browser is opened on the authorization URL, which is also printed for when no browser
opens (`--no-browser`: only printed). Tokens go to the file store every client command reads
(`--token-store`, else $MCP_STATELESS_TOKEN_STORE, else ~/.config/mcp-stateless/tokens.json, mode 0600).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from .base import CliError


def register(sub: Any) -> None:
    p = sub.add_parser("login", help="authorize for a protected server and store its token",
                       description="Authorize for a protected MCP server (OAuth 2.1, authorization code with "
                                   "PKCE) and store the token for the other client commands.")
    p.set_defaults(run=run)
    p.add_argument("url", metavar="URL", help="the server's URL, e.g. https://mcp.example.com/mcp")
    p.add_argument("--scope", action="append", default=[], metavar="SCOPE",
                   help="ask for this scope too (repeatable; the server's own challenge decides the rest)")
    p.add_argument("--client-id", help="a client_id registered with the authorization server beforehand")
    p.add_argument("--client-secret", help="its secret (or $MCP_STATELESS_CLIENT_SECRET); needs --client-issuer")
    p.add_argument("--client-issuer", metavar="URL",
                   help="the authorization server the client id belongs to (its issuer URL); the credentials are "
                        "used only with it")
    p.add_argument("--client-metadata-url", metavar="URL",
                   help="this client's Client ID Metadata Document (an https URL), used where supported")
    p.add_argument("--port", type=int, default=0, help="loopback port for the redirect (default: any free one)")
    p.add_argument("--no-browser", action="store_true", help="only print the authorization URL")
    p.add_argument("--wait", type=float, default=300.0, help="seconds to wait for the redirect (default 300)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds for each exchange with the server or its authorization server, body "
                        "included (default 10)")
    token_store_option(p)


def token_store_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--token-store", metavar="PATH",
                   help="token file (default $MCP_STATELESS_TOKEN_STORE or ~/.config/mcp-stateless/tokens.json)")


async def _login(args: Any) -> int:
    from ..client.oauth import FileTokenStore, LoopbackAuthorizer, OAuth, PreRegistered, system_browser

    secret = args.client_secret or os.environ.get("MCP_STATELESS_CLIENT_SECRET")
    if secret and not args.client_id:
        raise CliError("--client-secret needs --client-id")
    # The protected resource names the authorization server: without a fixed issuer, a hostile resource could
    # name one that collects the secret.
    if secret and not args.client_issuer:
        raise CliError("--client-secret needs --client-issuer (the authorization server the secret belongs to)")
    browser = None if args.no_browser else system_browser
    authorizer = LoopbackAuthorizer(args.port, timeout=args.wait, open_browser=browser)
    store = FileTokenStore(args.token_store)
    pre = [PreRegistered(args.client_id, secret, args.client_issuer)] if args.client_id else []
    oauth = OAuth(authorizer=authorizer, store=store, pre_registered=pre, client_metadata_url=args.client_metadata_url,
                  client_name="mcp-stateless", scopes=args.scope, timeout=args.timeout)
    try:
        challenge = await _challenge(oauth, args.url)
        tokens = await oauth.login(args.url, challenge)
    finally:
        authorizer.close()
        await oauth.aclose()
    print(f"logged in to {args.url} (scopes: {' '.join(tokens.scopes) or 'none'}); token stored in {store.path}",
          file=sys.stderr)
    return 0


async def _challenge(oauth: Any, url: str) -> str | None:
    """The server's own 401 challenge (its scope and metadata URL), asked for with an unsigned request; its
    head must arrive within the login's timeout (the body is not read)."""
    import asyncio

    from ..client.http11 import HttpError, HttpUrl, Pool

    timeout = oauth.http.timeout
    pool = Pool(max_idle=0)
    try:
        async with asyncio.timeout(timeout):
            resp = await pool.request("POST", HttpUrl.parse(url), {"Content-Type": "application/json",
                                                                   "Accept": "application/json, text/event-stream"},
                                      b"{}", timeout=None)
        await resp.aclose()
    except TimeoutError:
        raise CliError(f"cannot reach {url}: no answer within {timeout:g} s") from None
    except HttpError as e:
        raise CliError(f"cannot reach {url}: {e}") from None
    finally:
        await pool.aclose()
    if resp.status != 401:
        return None
    value: str | None = resp.headers.get("www-authenticate")
    return value


def run(args: argparse.Namespace) -> int:
    import asyncio

    from ..client import ClientError

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_login(args))
    except ClientError as e:
        print(f"mcp-stateless: login failed: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        raise CliError(str(e)) from None
    except KeyboardInterrupt:
        return 130
