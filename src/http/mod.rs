//! The HTTP side: a hyper 1 server that answers from the current snapshot.
//!
//! - `server`: the accept loop and graceful shutdown; takes a bound listener, so tests bind
//!   `127.0.0.1:0` and run it in-process;
//! - `pipeline`: one request, start to end: parse, route, authorise (one token lookup),
//!   simulate and fault, represent, record (metrics, access log, journal);
//! - `router`: the checks, simulation and representation of the pipeline's middle;
//! - `admin`: the admin rule of the operational routes (loopback, or `--admin-token`);
//! - `cors`: CORS headers and preflights;
//! - `details`: where the details endpoint finds its `reference`;
//! - `negotiate`: `Accept-Encoding` and `If-None-Match`;
//! - `control`: the `X-Eventbox-*` control headers (per-request simulation);
//! - `fault`: making the faults they ask for happen below hyper (reset, empty, truncate);
//! - `journal`: the request journal behind `/_journal`;
//! - `idle`: the idle-timeout wrapper around each connection;
//! - `guard`: ambiguous or oversized requests refused before routing (two tokens, long URLs);
//! - `deadline`: the request body deadline (`--body-timeout`);
//! - `per_ip`: the connections each client address may hold (`--max-connections-per-ip`);
//! - `drain`: shutdown closes idle connections at once (HTTP/2 ones included).

pub(crate) mod admin;
pub(crate) mod control;
pub(crate) mod cors;
pub(crate) mod deadline;
pub(crate) mod details;
pub(crate) mod drain;
pub(crate) mod fault;
pub(crate) mod guard;
pub(crate) mod idle;
pub(crate) mod journal;
pub(crate) mod negotiate;
mod paging;
pub(crate) mod per_ip;
mod pipeline;
pub(crate) mod router;
mod sendfile;
pub(crate) mod server;

pub(crate) use journal::Journal;
pub(crate) use server::Limits;
pub use server::{serve, Service, DRAIN_TIMEOUT};
