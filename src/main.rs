//! The `eventbox` binary: parse the command line, start logging, dispatch, exit with a code.
//! Everything else lives in the library.

use std::process::ExitCode;

use clap::Parser;
use eventbox::cli::{self, Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let code = match cli.command {
        Some(Command::Check(args)) => match cli::check(&args, &mut std::io::stdout().lock()) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("eventbox: cannot write the report: {e}");
                cli::EXIT_UNUSABLE
            }
        },
        Some(Command::Serve(args)) => run_serve(&args),
        None => run_serve(&cli.serve),
    };
    ExitCode::from(code)
}

fn run_serve(args: &cli::ServeArgs) -> u8 {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(cli::serve(args)),
        Err(e) => {
            eprintln!("eventbox: cannot start the runtime: {e}");
            1
        }
    }
}
