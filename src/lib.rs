//! eventbox: a stand-in server for an event platform's API (its reads and its writes),
//! answering from snapshots on disk.
//!
//! # Public API
//! What the `eventbox` binary (another crate), client test suites and embedders use; the rest
//! is crate-private, so it can change without breaking anyone:
//! - [`testing`]: `TestServer`, a whole eventbox in a test process on `127.0.0.1:0`, from a data
//!   folder or from [`testing::Bundle`]s built in code, and what it received
//!   ([`testing::Expect`], `verify`) (docs/client-testing.md);
//! - [`app`]: [`app::App`], built from [`config::ServeOptions`] (checked as `serve` checks
//!   its flags): load, watch, each bundle's state ([`app::App::bundles`]), and the
//!   [`http::Service`] that [`http::serve`] answers from on a listener you bound (embedding:
//!   `cli::serve`'s source is the full sequence, kiosk and object storage included);
//! - [`http`]: [`http::serve`] and what it takes ([`http::Service`], made by
//!   [`app::App::service`] from the options), and [`http::DRAIN_TIMEOUT`];
//! - [`config`]: [`config::ServeOptions`], the one options struct of `serve`;
//! - `cli` and `probe` (hidden from these docs): the commands as the `eventbox` binary runs
//!   them (`serve`, `check`, `pull`, `gen`, `completions`, `man`, `probe URL`) and their exit
//!   codes;
//! - `pull`, `gen`: snapshot a live event, or invent one, into a bundle, from code;
//! - [`watch`]: how the data folder is watched ([`watch::WatchMode`], [`watch::Watcher`]);
//! - [`kiosk`]: with `pull`, the handles of a desk's refresher and write forwarder
//!   (`Refresher`, `Forwarder`) that [`app::App`] starts, to stop them in order;
//! - [`problem`]: the errors and warnings, with file and place, that loading reports;
//! - [`token`]: the secret that opens a bundle, never printed whole, compared in constant time.
//!
//! # Layout (crate-private parts)
//! - `api`: the endpoint table every per-endpoint part derives from;
//! - `errors`: the error contract (the service's envelope, stable codes), as constant bodies,
//!   named by the table, the writes and the HTTP side alike;
//! - `model`: the records and bodies of the API, decoded and validated from JSON or TOML text;
//! - `load`: reads a bundle folder into a bundle, collecting every problem (each file through
//!   `read`: regular files only, without blocking, size-capped; each load under `timed`'s limit);
//! - `prepare`: a bundle's answers as the bytes that are served (identity, gzip, brotli, ETag);
//! - `catalog`: every bundle folder across reloads, and which version serves which token;
//! - `store`: the immutable snapshot behind ArcSwap; `reload`: builds and swaps a new one;
//! - `simulate`: the latency and errors a bundle's `[simulate]` table asks for;
//! - `metrics`: Prometheus metrics; `rng`: the seeded generator behind `gen`.
//!
//! See ARCHITECTURE.md for the invariants.
//!
//! # Cargo features
//! - `cli` (default): the `eventbox` binary and the modules only it uses (`cli`, `probe`, the
//!   logging subscriber, shell completions, the man page); implies `pull`, `gen` and
//!   `object-store`;
//! - `pull`: the `pull` module, with its HTTP client (reqwest on rustls), retries and progress
//!   bar, and the kiosk's refresher and forwarder;
//! - `gen`: the `gen` module;
//! - `object-store`: bundles served from and pulled into object storage (`--data s3://…`,
//!   `gs://`, `az://`, WebDAV), through `cli::serve` and `pull` (not through [`app::App`],
//!   which serves a local folder);
//! - `fuzzing`: the fuzz targets' entry points; not an API.
//!
//! With `default-features = false` the library keeps the server, `config` and
//! [`testing::TestServer`], which is what a project testing an API client needs.
// One module maps memory (`memfile`, its soundness argued at its top); nothing else is unsafe.
#![deny(unsafe_code)]
// Crate-private by default: a `pub` item no one outside the crate can reach is a warning (CI
// denies warnings), so the public API is only what this file exports on purpose.
#![warn(unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Without the CLI (`default-features = false`, the test server alone), the crate-private helpers
// only the commands use (check's catalog loading, pull's plan, the option checks) are unused.
#![cfg_attr(not(feature = "cli"), allow(dead_code))]

mod api;
pub mod app;
mod catalog;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli;
pub mod config;
mod errors;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "gen")]
pub mod gen;
pub mod http;
pub mod kiosk;
mod load;
#[allow(unsafe_code)]
mod memfile;
mod metrics;
#[cfg(feature = "object-store")]
mod mirror;
mod model;
mod prepare;
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod probe;
pub mod problem;
#[cfg(feature = "pull")]
pub mod pull;
mod read;
mod reload;
mod rng;
mod simulate;
#[cfg(any(feature = "pull", feature = "gen", feature = "object-store"))]
mod stage;
mod store;
pub mod testing;
mod timed;
pub mod token;
pub mod watch;
mod writes;

// The Rust examples of the README and the docs compile and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/client-testing.md")]
struct ClientTestingExamples;
