//! The `eventbox` binary: parse the command line, start logging, dispatch, exit with a code.
//! Everything else lives in the library.

use std::io::IsTerminal;
use std::process::ExitCode;

use eventbox::cli::{self, Cli, Command};
use eventbox::config::{LogFormat, ServeOptions};

/// jemalloc rather than the C library's malloc: the memory a reload frees goes back to the
/// system at once (its settings are built in: .cargo/config.toml), instead of staying in
/// the arena of the thread that freed it. docs/performance.md has the figures.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let (cli, serve) = Cli::parse_resolved();
    let rust_log = std::env::var("RUST_LOG").ok();
    let default_filter = rust_log.clone().unwrap_or_else(|| "info".to_string());
    let code = match cli.command {
        Some(Command::Check(args)) => {
            init_logging(LogFormat::Text, &default_filter);
            match cli::check(&args, &mut std::io::stdout().lock()) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("eventbox: cannot write the report: {e}");
                    cli::EXIT_UNUSABLE
                }
            }
        }
        Some(Command::Pull(args)) => {
            init_logging(LogFormat::Text, &default_filter);
            block_on(cli::pull(&args))
        }
        Some(Command::Gen(args)) => {
            init_logging(LogFormat::Text, &default_filter);
            block_on(cli::gen(&args))
        }
        Some(Command::Probe(args)) => eventbox::probe::run(&args),
        Some(Command::Completions(args)) => {
            written(cli::completions(&args, &mut std::io::stdout().lock()))
        }
        Some(Command::Man) => written(cli::man(&mut std::io::stdout().lock())),
        Some(Command::Serve(_)) | None => match serve {
            Some(Ok((options, warnings))) => run_serve(&options, &warnings, rust_log.as_deref()),
            Some(Err(e)) => {
                eprintln!("eventbox: {e}");
                cli::EXIT_UNUSABLE
            }
            None => cli::EXIT_UNUSABLE,
        },
    };
    ExitCode::from(code)
}

/// 0 when the output was written; a reader that closed the pipe early (`| head`) is no failure.
fn written(result: std::io::Result<()>) -> u8 {
    match result {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            eprintln!("eventbox: cannot write: {e}");
            1
        }
    }
}

/// Logs to stderr through `filter`, coloured only on a terminal and when `NO_COLOR` is unset
/// or empty (no-color.org).
fn init_logging(format: LogFormat, filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn run_serve(options: &ServeOptions, warnings: &[String], rust_log: Option<&str>) -> u8 {
    init_logging(options.log_format, &options.log_filter(rust_log));
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    block_on(cli::serve(options))
}

/// Runs a command on a multi-threaded tokio runtime; 1 when the runtime cannot start. Once the
/// command is done the process does not wait for blocking work left behind (a reload waiting
/// on a file system that does not answer) beyond a second.
fn block_on(command: impl std::future::Future<Output = u8>) -> u8 {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => {
            let code = rt.block_on(command);
            rt.shutdown_timeout(std::time::Duration::from_secs(1));
            code
        }
        Err(e) => {
            eprintln!("eventbox: cannot start the runtime: {e}");
            1
        }
    }
}
