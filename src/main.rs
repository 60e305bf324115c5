//! The `eventbox` binary: parse the command line, start logging, dispatch, exit with a code.
//! Everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;
use eventbox::cli::{self, Cli, Command, ServeArgs};
use eventbox::config::LogFormat;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let code = match cli.command {
        Some(Command::Check(args)) => {
            init_logging(LogFormat::Text);
            match cli::check(&args, &mut std::io::stdout().lock()) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("eventbox: cannot write the report: {e}");
                    cli::EXIT_UNUSABLE
                }
            }
        }
        Some(Command::Pull(args)) => {
            init_logging(LogFormat::Text);
            block_on(cli::pull(&args))
        }
        Some(Command::Gen(args)) => {
            init_logging(LogFormat::Text);
            block_on(cli::gen(&args))
        }
        Some(Command::Serve(args)) => run_serve(&args),
        None => run_serve(&cli.serve),
    };
    ExitCode::from(code)
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn run_serve(args: &ServeArgs) -> u8 {
    let (config, warnings) = match args.resolve() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("eventbox: {e}");
            return cli::EXIT_UNUSABLE;
        }
    };
    init_logging(config.log_format);
    for w in warnings {
        tracing::warn!("configuration: {w}");
    }
    block_on(cli::serve(&config))
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
