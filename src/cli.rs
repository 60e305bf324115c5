//! The command line: `serve` (the default), `check`, `pull` and `gen`. clap parses the raw flags here; `config`
//! merges them with the configuration file; the commands return an exit code, so `main` stays a
//! dispatcher.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tokio::net::TcpListener;

use crate::app::App;
use crate::catalog::Catalog;
use crate::config::{self, LogFormat, Overrides, ServeConfig, WatchKind};
use crate::http::cors::Cors;
use crate::problem::{token_hint, Severity};

/// Exit code: the data folder, the address or the configuration could not be used.
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
    Serve(Box<ServeArgs>),
    /// Check the data folder: every problem on its own line, then a summary.
    Check(CheckArgs),
    /// Copy a live event (the service or another eventbox) into a bundle, swapped in whole.
    Pull(PullArgs),
    /// Invent a realistic event as a bundle; the same seed gives the same files.
    Gen(GenArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// The data folder: one sub-folder per bundle [default: data]
    #[arg(long, env = "EVENTBOX_DATA")]
    pub data: Option<PathBuf>,
    /// The address to listen on [default: 127.0.0.1:8080]
    #[arg(long, env = "EVENTBOX_ADDR")]
    pub addr: Option<SocketAddr>,
    /// How to notice changed files [default: native]
    #[arg(long, env = "EVENTBOX_WATCH", value_enum)]
    pub watch: Option<WatchKind>,
    /// Do not watch the data folder (SIGHUP still reloads); the same as --watch off
    #[arg(long, env = "EVENTBOX_NO_WATCH", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_watch: Option<bool>,
    /// How often --watch poll scans, e.g. 500ms or 2s [default: 250ms]
    #[arg(long, env = "EVENTBOX_POLL_INTERVAL", value_parser = config::parse_duration)]
    pub poll_interval: Option<Duration>,
    /// How long changes must settle before a reload, e.g. 100ms [default: 100ms]
    #[arg(long, env = "EVENTBOX_DEBOUNCE", value_parser = config::parse_duration)]
    pub debounce: Option<Duration>,
    /// Log lines as text or JSON (RUST_LOG filters them) [default: text]
    #[arg(long, env = "EVENTBOX_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Log one line per request (method, path, status, duration, bundle, token hint);
    /// --access-log=false turns off a configuration file's
    #[arg(long, env = "EVENTBOX_ACCESS_LOG", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub access_log: Option<bool>,
    /// Send gzip and brotli bodies to clients that accept them [default: on]
    #[arg(long, env = "EVENTBOX_COMPRESSION", value_enum)]
    pub compression: Option<config::Switch>,
    /// An origin allowed to read answers from a browser; repeat it for more; `*` for all, `none`
    /// to turn CORS off [default: *]
    #[arg(
        long = "cors-origin",
        env = "EVENTBOX_CORS_ORIGIN",
        value_delimiter = ','
    )]
    pub cors_origins: Vec<String>,
    /// Time allowed for a request's headers (also bounds an idle HTTP/1 connection) [default: 10s]
    #[arg(long, env = "EVENTBOX_HEADER_TIMEOUT", value_parser = config::parse_duration)]
    pub header_timeout: Option<Duration>,
    /// Close a connection with no traffic for this long [default: 60s]
    #[arg(long, env = "EVENTBOX_IDLE_TIMEOUT", value_parser = config::parse_duration)]
    pub idle_timeout: Option<Duration>,
    /// The largest request head in bytes [default: 16384]
    #[arg(long, env = "EVENTBOX_MAX_HEADER_BYTES")]
    pub max_header_bytes: Option<usize>,
    /// Connections served at once; more wait to be accepted [default: 4096]
    #[arg(long, env = "EVENTBOX_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Connections one client address may hold at once; more are closed at once [default: 64]
    #[arg(long, env = "EVENTBOX_MAX_CONNECTIONS_PER_IP")]
    pub max_connections_per_ip: Option<usize>,
    /// Time allowed for a request body to arrive whole, e.g. 10s [default: 10s]
    #[arg(long, env = "EVENTBOX_BODY_TIMEOUT", value_parser = config::parse_duration)]
    pub body_timeout: Option<Duration>,
    /// The largest bundle file read, in bytes; a larger one is an error of its bundle
    /// [default: 1073741824]
    #[arg(long, env = "EVENTBOX_MAX_FILE_BYTES")]
    pub max_file_bytes: Option<u64>,
    /// Obey the X-Eventbox-Delay, X-Eventbox-Status and X-Eventbox-Fault request headers (for
    /// testing clients; ignored without it); --allow-control-headers=false undoes a file's
    /// allow_control_headers = true
    #[arg(long, env = "EVENTBOX_ALLOW_CONTROL_HEADERS", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_control_headers: Option<bool>,
    /// The longest simulated delay (control headers and bundle simulation), e.g. 5s [default: 30s]
    #[arg(long, env = "EVENTBOX_MAX_DELAY", value_parser = config::parse_duration)]
    pub max_delay: Option<Duration>,
    /// Keep the last N requests in memory, listed at GET /_journal (0: off; at most 100000)
    /// [default: 0]
    #[arg(long, env = "EVENTBOX_JOURNAL", value_name = "N")]
    pub journal: Option<usize>,
    /// A TOML file with any of these options; flags and EVENTBOX_* variables override it
    #[arg(long, env = "EVENTBOX_CONFIG")]
    pub config: Option<PathBuf>,
}

impl ServeArgs {
    /// The serve configuration, and the warnings to log once logging runs.
    pub fn resolve(&self) -> Result<(ServeConfig, Vec<String>), config::ConfigError> {
        let overrides = Overrides {
            data: self.data.clone(),
            addr: self.addr,
            watch: self.watch,
            no_watch: self.no_watch,
            poll_interval: self.poll_interval,
            debounce: self.debounce,
            log_format: self.log_format,
            access_log: self.access_log,
            compression: self.compression,
            cors_origins: self.cors_origins.clone(),
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            max_header_bytes: self.max_header_bytes,
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip,
            body_timeout: self.body_timeout,
            max_file_bytes: self.max_file_bytes,
            allow_control_headers: self.allow_control_headers,
            max_delay: self.max_delay,
            journal: self.journal,
        };
        ServeConfig::resolve(&overrides, self.config.as_deref())
    }
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The data folder to check.
    #[arg(default_value = "data", env = "EVENTBOX_DATA")]
    pub dir: PathBuf,
    /// Count warnings as errors.
    #[arg(long)]
    pub strict: bool,
    /// The largest bundle file read, in bytes; a larger one is an error [default: 1073741824]
    #[arg(long, env = "EVENTBOX_MAX_FILE_BYTES")]
    pub max_file_bytes: Option<u64>,
}

#[derive(Debug, Clone, Args)]
pub struct PullArgs {
    /// The service: its origin or its API base, e.g. https://host/api/v1
    #[arg(long, value_name = "BASE_URL")]
    pub from: String,
    /// The token that opens the event (EVENTBOX_TOKEN keeps it out of the process list)
    #[arg(long, env = "EVENTBOX_TOKEN", hide_env_values = true)]
    pub token: crate::pull::Token,
    /// The bundle folder to create or replace
    #[arg(long, value_name = "DIR/NAME")]
    pub into: PathBuf,
    /// Detail requests in flight at once
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub concurrency: usize,
    /// Re-indent the JSON instead of keeping the bodies byte for byte
    #[arg(long)]
    pub pretty: bool,
    /// Retries of one request (timeouts, connection errors, 429, 5xx)
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub retries: u32,
    /// Time allowed to connect
    #[arg(long, default_value = "10s", value_parser = config::parse_duration)]
    pub connect_timeout: Duration,
    /// Time allowed for one request, its body included
    #[arg(long, default_value = "60s", value_parser = config::parse_duration)]
    pub timeout: Duration,
    /// The longest wait before a retry, Retry-After included
    #[arg(long, default_value = "30s", value_parser = config::parse_duration)]
    pub max_retry_wait: Duration,
    /// A bar on a terminal and plain lines otherwise (auto), plain lines, or nothing
    #[arg(long, value_enum, default_value_t = crate::pull::ProgressMode::Auto)]
    pub progress: crate::pull::ProgressMode,
}

impl PullArgs {
    pub fn options(&self) -> crate::pull::PullOptions {
        let mut o =
            crate::pull::PullOptions::new(self.from.clone(), self.token.expose(), &self.into);
        o.concurrency = self.concurrency;
        o.pretty = self.pretty;
        o.retries = self.retries;
        o.connect_timeout = self.connect_timeout;
        o.timeout = self.timeout;
        o.max_retry_wait = self.max_retry_wait;
        o.progress = self.progress;
        o
    }
}

#[derive(Debug, Clone, Args)]
pub struct GenArgs {
    /// The bundle folder to create or replace
    #[arg(long, value_name = "DIR/NAME")]
    pub into: PathBuf,
    /// How many payments
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub payments: usize,
    /// How many submissions
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub submissions: usize,
    /// The seed: the same seed gives the same files
    #[arg(long, default_value_t = 1, value_name = "S")]
    pub seed: u64,
    /// The token that opens the bundle [default: NAME-token]
    #[arg(long, value_name = "T")]
    pub token: Option<crate::pull::Token>,
}

/// `eventbox pull`: 0 when the new copy is in place, 1 when the pull failed (the earlier copy
/// is untouched), 2 when the options cannot be used. Ctrl-C (130) and SIGTERM (143) stop it the
/// same way: the pull is dropped, which removes its staging folder.
pub async fn pull(args: &PullArgs) -> u8 {
    use crate::pull::PullError;
    let options = args.options();
    let stop = stop_signal();
    let result = tokio::select! {
        r = crate::pull::run(&options) => r,
        stop = stop => {
            let name = stop.name();
            eprintln!("eventbox pull: interrupted ({name}); the earlier copy is as it was");
            return stop.exit_code();
        }
    };
    match result {
        Ok(summary) => {
            say(format_args!("{summary}"));
            0
        }
        Err(e) => {
            eprintln!("eventbox pull: {e}");
            match e {
                PullError::BadBase { .. }
                | PullError::BadTarget { .. }
                | PullError::BadToken(_)
                | PullError::BadConcurrency => EXIT_UNUSABLE,
                _ => 1,
            }
        }
    }
}

/// `eventbox gen`: 0 when the bundle is in place, 1 when it could not be written, 2 when the
/// options cannot be used. Ctrl-C (130) and SIGTERM (143) stop it and remove its staging folder.
pub async fn gen(args: &GenArgs) -> u8 {
    use crate::gen::{GenError, GenOptions};
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let options = GenOptions {
        into: args.into.clone(),
        payments: args.payments,
        submissions: args.submissions,
        seed: args.seed,
        token: args.token.clone(),
        cancel: Some(std::sync::Arc::clone(&cancel)),
    };
    let stop = stop_signal();
    let mut task = tokio::task::spawn_blocking(move || crate::gen::run(&options));
    let joined = tokio::select! {
        r = &mut task => r,
        stop = stop => {
            // The generator stops at its next check and removes its staging folder.
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
            let what = match task.await {
                Ok(Ok(_)) => "the bundle was already in place",
                _ => "nothing was swapped in",
            };
            eprintln!("eventbox gen: interrupted ({}); {what}", stop.name());
            return stop.exit_code();
        }
    };
    let result = match joined {
        Ok(r) => r,
        Err(e) => {
            eprintln!("eventbox gen: the generator stopped: {e}");
            return 1;
        }
    };
    match result {
        Ok(summary) => {
            say(format_args!("{summary}"));
            0
        }
        Err(e) => {
            eprintln!("eventbox gen: {e}");
            match e {
                GenError::BadTarget { .. } | GenError::BadToken => EXIT_UNUSABLE,
                _ => 1,
            }
        }
    }
}

/// `eventbox check`: 0 when clean (or only warnings without `--strict`), 1 on errors, 2 when the
/// folder cannot be read.
pub fn check(args: &CheckArgs, out: &mut impl std::io::Write) -> std::io::Result<u8> {
    let max_file_bytes = args
        .max_file_bytes
        .unwrap_or(crate::read::DEFAULT_MAX_FILE_BYTES);
    let catalog = match Catalog::load_capped(&args.dir, max_file_bytes) {
        Ok(c) => c,
        Err(e) => {
            writeln!(out, "error: {e}")?;
            return Ok(EXIT_UNUSABLE);
        }
    };
    for entry in catalog.entries() {
        for p in entry.all_problems() {
            let severity = if args.strict {
                Severity::Error
            } else {
                p.severity
            };
            writeln!(out, "{}: {p}", severity.as_str())?;
        }
    }
    let errors = catalog.count(Severity::Error);
    let warnings = catalog.count(Severity::Warning);
    let served = catalog.entries().filter(|e| e.serving.is_some()).count();
    let total = catalog.entries().count();
    writeln!(
        out,
        "{total} bundle{} checked, {served} would be served; {errors} error{}, {warnings} warning{}{}",
        plural(total),
        plural(errors),
        plural(warnings),
        if args.strict && warnings > 0 {
            " (--strict: warnings count as errors)"
        } else {
            ""
        },
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

/// `eventbox serve`: bind, load, print the address and the bundles, watch, serve until Ctrl-C or
/// SIGTERM. `/readyz` answers 503 until the first load is published.
pub async fn serve(config: &ServeConfig) -> u8 {
    // Fail fast, before binding, when the folder is not there at all.
    if let Err(e) = crate::load::bundle_names(&config.data) {
        eprintln!("eventbox: {e}");
        return EXIT_UNUSABLE;
    }
    // The SIGHUP handler exists before the port opens: a SIGHUP never finds the default action
    // (which ends the process).
    let app = App::with_compression(&config.data, config.compression)
        .with_max_file_bytes(config.max_file_bytes);
    spawn_sighup_reloads(&app);
    let listener = match TcpListener::bind(config.addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("eventbox: cannot listen on {}: {e}", config.addr);
            return EXIT_UNUSABLE;
        }
    };
    let addr = listener.local_addr().map_or(config.addr, |a| a);
    say(format_args!("eventbox listening on http://{addr}"));
    let mut service = app.service(config.access_log);
    service.cors = Cors::from_origins(&config.cors_origins);
    service.limits = config.limits;
    service.max_delay = config.max_delay;
    let service = service
        .with_control_headers(config.allow_control_headers)
        .with_journal(config.journal);
    if config.allow_control_headers {
        tracing::warn!(
            "control headers are obeyed: any client may delay, fail or break its answers"
        );
    }
    if config.allow_control_headers && config.limits.idle_timeout <= config.max_delay {
        tracing::warn!(
            idle_timeout = ?config.limits.idle_timeout,
            max_delay = ?config.max_delay,
            "--idle-timeout is not above --max-delay: a connection may be closed during a \
             simulated delay; raise --idle-timeout"
        );
    }
    if config.journal > 0 {
        tracing::info!(capacity = config.journal, "request journal on at /_journal");
    }
    let server = tokio::spawn(crate::http::serve(listener, service, shutdown_signal()));
    // Watch before the first load, so that nothing changed in between is missed (a change seen
    // during the load only reloads once more).
    let _watcher = match app.watch(config.watch, config.debounce).await {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("{e}; changes are picked up on SIGHUP only");
            None
        }
    };
    let loader = app.clone();
    match tokio::task::spawn_blocking(move || loader.load()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            eprintln!("eventbox: {e}");
            return EXIT_UNUSABLE;
        }
        Err(e) => {
            eprintln!("eventbox: the first load failed: {e}");
            return 1;
        }
    }
    let printer = app.clone();
    let data = config.data.clone();
    // The catalog's lock is a blocking one: take it off the async threads.
    let _ = tokio::task::spawn_blocking(move || print_bundles(&printer, &data)).await;

    match server.await {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            eprintln!("eventbox: {e}");
            1
        }
        Err(e) => {
            eprintln!("eventbox: the server stopped: {e}");
            1
        }
    }
}

/// Prints a startup line. A closed or full stdout (piped into `head`, a reader that went away)
/// must not stop the server, so write errors are ignored rather than panicking as `println!` does.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn print_bundles(app: &App, data: &std::path::Path) {
    app.reloader.with_catalog(|catalog| {
        let mut any = false;
        for entry in catalog.entries() {
            let Some(version) = &entry.serving else {
                continue;
            };
            any = true;
            let first = version
                .tokens
                .first()
                .map(|t| token_hint(t.expose()))
                .unwrap_or_default();
            say(format_args!("  bundle {:<20} token {first}", entry.name));
        }
        if !any {
            say(format_args!(
                "  no bundle is served: add one under {}",
                data.display()
            ));
        }
    });
}

/// SIGHUP reloads every bundle now.
fn spawn_sighup_reloads(app: &App) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP");
            return;
        };
        let app = app.clone();
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                tracing::info!("SIGHUP: reloading every bundle");
                let app = app.clone();
                let _ = tokio::task::spawn_blocking(move || app.load()).await;
            }
        });
    }
    #[cfg(not(unix))]
    let _ = app;
}

/// The signal that asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Ctrl-C (SIGINT).
    Interrupt,
    /// SIGTERM (`timeout`, systemd, Kubernetes).
    Terminate,
}

impl Stop {
    /// The shell's convention: 128 + the signal's number.
    pub fn exit_code(self) -> u8 {
        match self {
            Stop::Interrupt => 130,
            Stop::Terminate => 143,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "Ctrl-C",
            Stop::Terminate => "SIGTERM",
        }
    }
}

/// Completes on Ctrl-C or SIGTERM, saying which. On unix the handlers are installed when this is
/// called (inside a runtime), not when the future is first polled, so work started after the call
/// is covered from its first instant.
pub fn stop_signal() -> impl std::future::Future<Output = Stop> + Send {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        async fn recv(handler: Option<tokio::signal::unix::Signal>) {
            match handler {
                Some(mut h) => {
                    h.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        }
        let interrupt = recv(signal(SignalKind::interrupt()).ok());
        let terminate = recv(signal(SignalKind::terminate()).ok());
        async move {
            tokio::select! {
                () = interrupt => Stop::Interrupt,
                () = terminate => Stop::Terminate,
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        Stop::Interrupt
    }
}

/// Completes on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    stop_signal().await;
    tracing::info!("shutting down: no new connections; requests in flight may finish");
}
