"""What the inventory can find: each kind of hidden-state dependency, the migration step it belongs to and its fix.

Steps are the nine steps of migrating a 2025-era server to the stateless revision (2026-07-28), in order:
1 the per-request envelope, 2 server/discover, 3 era-correct results, 4 no hidden protocol state, 5 no
server-originated requests, 6 event delivery by subscriptions/listen, 7 Streamable HTTP routing, 8 failure
behaviour, 9 authentication of every request. The report groups findings by step, in that order.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Kind:
    id: str
    step: int
    title: str
    fix: str


STEP_TITLES: dict[int, str] = {
    1: "Accept the modern request envelope",
    2: "Implement server/discover",
    3: "Make results era-correct",
    4: "Remove hidden protocol state",
    5: "Replace server-originated requests",
    6: "Replace event delivery",
    7: "Update Streamable HTTP routing",
    8: "Revisit failure behaviour",
    9: "Authenticate every request",
}

# The one kind that groups other findings: a module's wiring of the 2025 SDK's transports (the analyzers mark its
# findings, `glue.fold` makes them one finding per module, reported after the application's findings of its step).
TRANSPORT_GLUE = "transport-session-map"

_KINDS: tuple[Kind, ...] = (
    Kind("dependency-range", 1,
         "The declared MCP SDK range admits a major version the code was not written for",
         "Pin the SDK major you target (for example `mcp>=1.9,<2`; in package.json "
         "`\"@modelcontextprotocol/sdk\": \"^1.30.0\"`), or move the server to an SDK that speaks "
         "2026-07-28 (mcp-stateless, `mcp` 2.x) and declare that range."),
    Kind("stdout-write", 1,
         "Writes to stdout in a stdio server (stdout carries only protocol messages)",
         "Write diagnostics to stderr (`print(..., file=sys.stderr)`, `console.error`) or a logger bound to "
         "stderr; stdout is the protocol channel."),
    Kind("initialize-state", 1,
         "Client capabilities, client info or protocol version from the initialize exchange, kept and reused",
         "Read them from the request being handled (`params._meta` `io.modelcontextprotocol/clientCapabilities`, "
         "`.../protocolVersion`, `.../clientInfo`; in mcp-stateless `ctx.client_capabilities`, "
         "`ctx.protocol_version`); never keep them from an earlier request."),
    Kind("session-keyed-state", 4,
         "State kept in a map or cache keyed by the session (its id or the session object)",
         "Mint an explicit handle (in mcp-stateless a `Handle` subclass: `await Cart.mint(ctx, data)`) returned by "
         "the tool that starts the work and passed back as an argument (`Cart.resolve(handle_id, ctx)`); keep its "
         "data in a shared store (SQLite, Redis) so any instance resolves it."),
    Kind("session-id-read", 4,
         "Reads the protocol session id (`Mcp-Session-Id`, the transport's session id)",
         "Drop the session id: a 2026-07-28 request carries none. Identify continuing work by a handle argument, "
         "and the caller by the authenticated principal (`ctx.principal`)."),
    Kind("module-state", 4,
         "Module-level or class-level mutable state written by handlers (cross-call state with no handle)",
         "Keep cross-call data in a shared store behind a handle the client passes back (or a key derived from "
         "the principal); an instance's memory is not shared with the next request's instance."),
    Kind("local-file-state", 4,
         "State written by a tool to a file on the instance's own disk (each instance keeps its own copy)",
         "Keep the data in a store every instance shares (a database, Redis, object storage), named by a handle "
         "the client passes back (in mcp-stateless `await Cart.mint(ctx, data)`) or keyed by the principal; a file "
         "on one instance's disk is not seen by the next request's instance, and is lost when it is replaced."),
    Kind("lifespan-client-state", 4,
         "A lifespan or server-scoped object that collects per-client data",
         "Keep only process-wide resources (pools, clients) in the lifespan; per-client data goes behind a "
         "handle in a shared store."),
    Kind("process-secret", 4,
         "A secret or key generated per process (every instance gets a different one)",
         "Load the key from configuration shared by every instance (for mcp-stateless `MCP_STATELESS_KEYS`), "
         "so a handle or `requestState` sealed by one instance opens on another and after a restart."),
    Kind("server-request", 5,
         "A server-to-client request (sampling, elicitation, roots, ping) sent while handling a call",
         "Return `resultType: \"input_required\"` with `inputRequests` (MRTR) and finish when the client retries "
         "with `inputResponses`; carry what the retry needs in the sealed `requestState`."),
    Kind("client-answer-kept", 5,
         "The answer to a server-to-client request kept beyond the call (for example roots stored globally)",
         "Ask for it in the call that needs it (MRTR `inputRequests`, roots included) or take it as a tool "
         "argument; never let one client's answer change what another request sees."),
    Kind("log-level-state", 4,
         "A log level set by `logging/setLevel` and kept for later requests",
         "Read the level of each request from `params._meta` `io.modelcontextprotocol/logLevel` and send "
         "`notifications/message` only on that request's response stream."),
    Kind("resource-subscriptions", 6,
         "A set of resource subscriptions kept by the server (`resources/subscribe`)",
         "Serve `subscriptions/listen`: the client names the resources it wants on its listen request; publish "
         "changes to a shared bus so every instance's listen streams receive them."),
    Kind("unsolicited-notification", 6,
         "A notification sent outside any request (timers, watchers, `resources/updated`, list_changed)",
         "Publish the change as an event; clients receive it on their `subscriptions/listen` stream. Progress "
         "and log messages belong on the response stream of the request they describe."),
    Kind("per-connection-registration", 6,
         "Tools, prompts or resources registered or removed after initialize, per connection or on client traits",
         "Register a fixed catalogue (or one keyed by the principal, read per request); announce changes to it "
         "as list_changed events on `subscriptions/listen`."),
    Kind("get-stream", 7,
         "GET (the standalone stream of server messages outside a request) or DELETE (a session's end) served "
         "on the MCP endpoint, or the HTTP+SSE transport",
         "Serve only POST on the modern endpoint (405 for GET and DELETE); move change events to "
         "`subscriptions/listen`, and server questions to MRTR."),
    Kind(TRANSPORT_GLUE, 7,
         "The 2025 SDK's transports kept per session: a map of transports by session id and the lookups that "
         "route each request to its session's transport (one grouped finding per module)",
         "Delete the map and its lookups: a 2026-07-28 request carries no session id, so one stateless handler "
         "serves every request on any instance, with no transport per client (in mcp-stateless `app.asgi()` "
         "mounted at the MCP path, or `mcp-stateless serve --http HOST:PORT`). What the application kept per "
         "session goes behind a handle the client passes back (`await Cart.mint(ctx, data)`), its data in a "
         "shared store."),
    Kind("event-replay", 8,
         "An event store or `Last-Event-ID` replay of a broken stream",
         "A dropped stream cancels its request: retry with a new request id when that is safe, and use an "
         "explicit operation handle or the Tasks extension for work that must outlive a stream."),
    Kind("connection-auth", 9,
         "Authorization decided once per session or connection, or from self-reported client info",
         "Authenticate every request from its own credentials (bearer token per request, `ctx.principal`); "
         "never from the handshake, the connection or `clientInfo`."),
)

KINDS: dict[str, Kind] = {k.id: k for k in _KINDS}
