//! One integration-test binary (one link step): every test talks to a real server over HTTP on
//! an ephemeral port, or runs the real `eventbox` binary for the command line.

mod admin;
mod attendees;
mod cli;
mod company;
mod compose;
mod configmap;
mod container;
mod docs;
mod endpoints;
mod errors;
mod examples;
mod files;
mod fixtures;
mod forward;
mod gen;
mod helpers;
mod http;
mod journal;
mod kiosk;
mod limits;
mod mirror;
mod openapi;
mod operations;
mod probe;
mod programme;
mod properties;
mod pull;
mod records;
mod reload;
mod simulate;
mod testing;
mod ui;
mod writes;
