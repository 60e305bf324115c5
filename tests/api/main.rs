//! One integration-test binary (one link step): every test talks to a real server over HTTP on
//! an ephemeral port, or runs the real `eventbox` binary for the command line.

mod endpoints;
mod errors;
mod helpers;
mod operations;
