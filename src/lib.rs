//! eventbox: a stand-in server for an event platform's read-only API, answering from snapshots
//! on disk.
//!
//! # Layout
//! - [`model`]: the records and bodies of the API, decoded and validated from JSON or TOML text;
//! - [`load`]: reads a data folder into bundles, collecting every problem;
//! - [`store`]: prepares each bundle's answers as bytes in an immutable snapshot, behind ArcSwap;
//! - [`http`]: the hyper server and the router that answers from the snapshot;
//! - [`cli`]: the command line (`serve`, `check`);
//! - [`problem`]: errors and warnings with the file and place they concern.
//!
//! See ARCHITECTURE.md for the invariants.
#![forbid(unsafe_code)]

pub mod cli;
pub mod http;
pub mod load;
pub mod model;
pub mod problem;
pub mod store;
