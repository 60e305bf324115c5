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
//! - `pull`: copies a live event into a bundle (checked, then swapped in whole by `stage`);
//! - `gen`: invents a realistic event as a bundle, the same for the same seed ([`rng`]);
//! - [`config`]: `serve`'s options, from flags, variables and the configuration file;
//! - `cli`: the command line (`serve`, `check`, `pull`, `gen`, ...);
//! - `probe`: `eventbox probe URL`, the container image's health check;
//! - [`problem`]: errors and warnings with the file and place they concern;
//! - [`token`]: the secret that opens a bundle, never printed whole, compared in constant time;
//! - [`testing`]: `TestServer`, a whole eventbox in a test process on `127.0.0.1:0`, from a data
//!   folder or from bundles built in code.
//!
//! See ARCHITECTURE.md for the invariants.
//!
//! # Cargo features
//! - `cli` (default): the `eventbox` binary and the modules only it uses (`cli`, `probe`, the
//!   logging subscriber, shell completions, the man page); implies `pull` and `gen`;
//! - `pull`: the `pull` module, with its HTTP client (reqwest on rustls), retries and progress
//!   bar;
//! - `gen`: the `gen` module.
//!
//! With `default-features = false` the library keeps the server, `config` and
//! [`testing::TestServer`], which is what a project testing an API client needs.
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod api;
pub mod app;
pub mod catalog;
#[cfg(feature = "cli")]
pub mod cli;
pub mod config;
#[cfg(feature = "gen")]
pub mod gen;
pub mod http;
pub mod load;
pub mod metrics;
pub mod model;
pub mod prepare;
#[cfg(feature = "cli")]
pub mod probe;
pub mod problem;
#[cfg(feature = "pull")]
pub mod pull;
pub mod reload;
pub mod rng;
pub mod simulate;
#[cfg(any(feature = "pull", feature = "gen"))]
pub mod stage;
pub mod store;
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
