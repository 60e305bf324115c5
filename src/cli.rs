//! The command line: `serve` (the default) and `check`. Raw flags are parsed by clap here; the
//! commands return an exit code, so `main` stays a dispatcher.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use tokio::net::TcpListener;

use crate::load::{self, Loaded};
use crate::problem::{token_hint, Severity};
use crate::store::{Snapshot, Store};

/// Exit code: the data folder (or the address) could not be used.
pub const EXIT_UNUSABLE: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "eventbox",
    version,
    about = "A stand-in server for the event platform's read-only API, answering from bundles on disk"
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `eventbox` alone means `eventbox serve`, with these options.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve every bundle of the data folder (the default).
    Serve(ServeArgs),
    /// Check the data folder: every problem on its own line, then a summary.
    Check(CheckArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The data folder: one sub-folder per bundle.
    #[arg(long, env = "EVENTBOX_DATA", default_value = "data")]
    pub data: PathBuf,
    /// The address to listen on.
    #[arg(long, env = "EVENTBOX_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The data folder to check.
    #[arg(default_value = "data", env = "EVENTBOX_DATA")]
    pub dir: PathBuf,
    /// Count warnings as errors.
    #[arg(long)]
    pub strict: bool,
}

/// `eventbox check`: 0 when clean (or only warnings without `--strict`), 1 on errors, 2 when the
/// folder cannot be read.
pub fn check(args: &CheckArgs, out: &mut impl std::io::Write) -> std::io::Result<u8> {
    let loaded = match load::load_dir(&args.dir) {
        Ok(l) => l,
        Err(e) => {
            writeln!(out, "error: {e}")?;
            return Ok(EXIT_UNUSABLE);
        }
    };
    for p in loaded.problems() {
        let severity = if args.strict {
            Severity::Error
        } else {
            p.severity
        };
        writeln!(out, "{}: {p}", severity.as_str())?;
    }
    let errors = loaded.count(Severity::Error);
    let warnings = loaded.count(Severity::Warning);
    let served = loaded.bundles().count();
    let total = loaded.reports.len();
    writeln!(
        out,
        "{total} bundle{} checked, {served} would be served; {errors} error{}, {warnings} warning{}{}",
        plural(total),
        plural(errors),
        plural(warnings),
        if args.strict && warnings > 0 { " (--strict: warnings count as errors)" } else { "" },
    )?;
    let failed = errors > 0 || (args.strict && warnings > 0);
    Ok(u8::from(failed))
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Logs every problem of a load, one line each.
fn log_problems(loaded: &Loaded) {
    for p in loaded.problems() {
        match p.severity {
            Severity::Error => tracing::error!("{p}"),
            Severity::Warning => tracing::warn!("{p}"),
        }
    }
    for r in loaded.reports.iter().filter(|r| r.bundle.is_none()) {
        tracing::error!(bundle = %r.name, "bundle not served: it has errors");
    }
}

/// Loads the data folder, reporting as `serve` does; `Err` carries the message for exit code 2.
pub fn initial_load(data: &Path) -> Result<Loaded, String> {
    let loaded = load::load_dir(data).map_err(|e| e.to_string())?;
    log_problems(&loaded);
    Ok(loaded)
}

/// `eventbox serve`: load, bind, print the address and the bundles, serve until Ctrl-C/SIGTERM.
pub async fn serve(args: &ServeArgs) -> u8 {
    let loaded = match initial_load(&args.data) {
        Ok(l) => l,
        Err(message) => {
            eprintln!("eventbox: {message}");
            return EXIT_UNUSABLE;
        }
    };
    let listener = match TcpListener::bind(args.addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("eventbox: cannot listen on {}: {e}", args.addr);
            return EXIT_UNUSABLE;
        }
    };
    let addr = listener.local_addr().map_or(args.addr, |a| a);
    println!("eventbox listening on http://{addr}");
    for bundle in loaded.bundles() {
        let first = bundle
            .config
            .tokens
            .first()
            .map(|t| token_hint(t))
            .unwrap_or_default();
        println!("  bundle {:<20} token {first}", bundle.name);
    }
    if loaded.bundles().next().is_none() {
        println!(
            "  no bundle is served: add one under {}",
            args.data.display()
        );
    }
    let store = Arc::new(Store::new(Snapshot::build(loaded)));
    match crate::http::serve(listener, store, shutdown_signal()).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("eventbox: {e}");
            1
        }
    }
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
    tracing::info!("shutting down");
}
