//! eventbox: a stand-in server for an event platform's read-only API, answering from snapshots
//! on disk.
//!
//! # Layout
//! - [`api`]: the endpoint table every per-endpoint part derives from;
//! - [`model`]: the records and bodies of the API, decoded and validated from JSON or TOML text;
//! - [`load`]: reads a bundle folder into a bundle, collecting every problem;
//! - [`catalog`]: every bundle folder across reloads, and which version serves which token;
//! - [`store`]: prepares each bundle's answers as bytes in an immutable snapshot, behind ArcSwap;
//! - [`reload`], [`watch`]: reading what changed and swapping a new snapshot in;
//! - [`http`]: the hyper server and the router that answers from the snapshot;
//! - [`simulate`]: the latency and errors a bundle's `[simulate]` table asks for;
//! - [`metrics`]: Prometheus metrics;
//! - [`app`]: those pieces wired together, as `serve` and the tests run them;
//! - [`pull`]: copies a live event into a bundle (staged, checked, swapped in whole);
//! - [`gen`]: invents a realistic event as a bundle, the same for the same seed ([`rng`]);
//! - [`config`], [`cli`]: the command line (`serve`, `check`, `pull`, `gen`) and the
//!   configuration file;
//! - [`probe`]: `eventbox probe URL`, the container image's health check;
//! - [`problem`]: errors and warnings with the file and place they concern;
//! - [`token`]: the secret that opens a bundle, never printed whole, compared in constant time;
//! - [`testing`]: `TestServer`, a whole eventbox in a test process on `127.0.0.1:0`, from a data
//!   folder or from bundles built in code.
//!
//! See ARCHITECTURE.md for the invariants.
#![forbid(unsafe_code)]

mod api;
pub mod app;
mod catalog;
pub mod cli;
pub mod config;
pub mod gen;
pub mod http;
mod load;
mod metrics;
mod model;
mod prepare;
pub mod probe;
pub mod problem;
pub mod pull;
mod reload;
mod rng;
mod simulate;
mod store;
pub mod testing;
pub mod token;
pub mod watch;

// The Rust examples of the README and the docs compile and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
#[cfg(doctest)]
#[doc = include_str!("../docs/client-testing.md")]
struct ClientTestingExamples;
