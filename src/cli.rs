//! The command line: `serve` (the default), `check`, `pull`, `gen`, `completions` and `man`.
//! clap parses the flags here (`serve`'s are [`ServeOptions`], in `config`); the commands return
//! an exit code, so `main` stays a dispatcher.

use std::path::PathBuf;

use clap::{Args, CommandFactory, Parser, Subcommand};
use tokio::net::TcpListener;

use crate::app::App;
use crate::catalog::{Catalog, Reading};
use crate::config::{self, LogFormat, ServeOptions};
use crate::problem::{Location, Severity};
use crate::token::Token;

/// Exit code: the data folder, the address or the configuration could not be used.
pub const EXIT_UNUSABLE: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "eventbox",
    version,
    about = "A stand-in server for the event platform's API, answering from bundles on disk"
)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `eventbox` alone means `eventbox serve`, with these options.
    #[command(flatten)]
    pub(crate) serve: ServeOptions,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve every bundle of the data folder (the default).
    Serve(Box<ServeOptions>),
    /// Check the data folder: every problem on its own line, then a summary.
    Check(CheckArgs),
    /// Copy a live event (the service or another eventbox) into a bundle, swapped in whole.
    Pull(Box<crate::pull::PullOptions>),
    /// Invent a realistic event as a bundle; the same seed gives the same files.
    Gen(crate::gen::GenOptions),
    /// Print a shell completion script, e.g. `eventbox completions bash > ~/.local/share/bash-completion/completions/eventbox`.
    Completions(CompletionsArgs),
    /// Print the man page (roff), e.g. `eventbox man | man -l -`.
    Man,
    /// GET a URL (plain HTTP): exit 0 on a 2xx answer, 1 otherwise (a container's health check).
    Probe(crate::probe::ProbeArgs),
}

impl Cli {
    /// Parses the command line (exiting with clap's message and code on a bad one) and, for
    /// `serve`, the options resolved over the configuration file, with the warnings to log once
    /// logging is set up: a file's key a flag or variable overrides, an `EVENTBOX_*` variable
    /// no option reads (a typo would otherwise go unnoticed: a file's is an error).
    pub fn parse_resolved() -> (Cli, Option<Resolved>) {
        let first = std::env::args_os().nth(1);
        let matches = command_for(first.as_deref()).get_matches();
        let cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
            Ok(cli) => cli,
            Err(e) => e.exit(),
        };
        let serve = match (&cli.command, matches.subcommand_matches("serve")) {
            (Some(Command::Serve(options)), Some(sub)) => {
                Some(ServeOptions::clone(options).resolve(sub))
            }
            (None, _) => Some(cli.serve.clone().resolve(&matches)),
            _ => None,
        };
        let serve = serve.map(|resolved| {
            resolved.map(|(options, mut warnings)| {
                let set = std::env::vars_os().filter_map(|(k, _)| k.into_string().ok());
                warnings.extend(unknown_variables(&Cli::command(), set));
                warnings.extend(std::env::vars_os().filter_map(|(name, value)| {
                    service_link(&name, &value).then(|| {
                        format!(
                            "{}={} is a Kubernetes service link (a Service named eventbox), \
                             not a port: it is not read (set the pod's enableServiceLinks: \
                             false, or give --port)",
                            name.to_string_lossy(),
                            value.to_string_lossy()
                        )
                    })
                }));
                (options, warnings)
            })
        });
        (cli, serve)
    }
}

/// The address `eventbox serve` with no flag would listen on here: what its `EVENTBOX_*`
/// variables, the configuration file they name and `PORT` say (`probe` without a URL).
pub(crate) fn served_address() -> Result<std::net::SocketAddr, String> {
    let matches = command_for(Some(std::ffi::OsStr::new("serve")))
        .try_get_matches_from(["eventbox", "serve"])
        .map_err(|e| e.to_string())?;
    let cli =
        <Cli as clap::FromArgMatches>::from_arg_matches(&matches).map_err(|e| e.to_string())?;
    let (Some(Command::Serve(options)), Some(sub)) =
        (cli.command, matches.subcommand_matches("serve"))
    else {
        return Err("no serve options".to_string());
    };
    let (options, _) = options.resolve(sub).map_err(|e| e.to_string())?;
    Ok(options.listen_addr())
}

/// `serve`'s options with the warnings to log once logging is set up, or why they cannot be
/// used.
pub type Resolved = Result<(ServeOptions, Vec<String>), config::ConfigError>;

/// Variables of eventbox's own scripts, examples and tests, read by no option.
const SCRIPT_VARIABLES: [&str; 7] = [
    "EVENTBOX_IMAGE",
    "EVENTBOX_IMAGE_SOURCE",
    "EVENTBOX_IMAGE_TARGET_DIR",
    "EVENTBOX_PUBLISH",
    "EVENTBOX_BLESS",
    "EVENTBOX_BIN",
    "EVENTBOX_URL",
];

/// Prefixes of the variables Kubernetes gives a pod for a Service named `eventbox` (service
/// links), which are no typos.
const SERVICE_LINKS: [&str; 2] = ["EVENTBOX_SERVICE_", "EVENTBOX_PORT_"];

/// Whether `value` is the one Kubernetes gives `name` for a Service named `eventbox`
/// (`EVENTBOX_PORT=tcp://10.0.0.1:8080`, a service link) rather than a setting: such a
/// variable is not read, with a warning, so the pod starts on its configured port instead of
/// failing on a port that is not a number.
fn service_link(name: &std::ffi::OsStr, value: &std::ffi::OsStr) -> bool {
    name == "EVENTBOX_PORT"
        && value.to_str().is_some_and(|v| {
            ["tcp://", "udp://", "sctp://"]
                .iter()
                .any(|scheme| v.starts_with(scheme))
        })
}

/// A warning for each variable of `set` named `EVENTBOX_*` that no option of any command
/// reads, with the closest one that does.
fn unknown_variables(command: &clap::Command, set: impl Iterator<Item = String>) -> Vec<String> {
    fn env_names(command: &clap::Command, into: &mut Vec<String>) {
        for arg in command.get_arguments() {
            if let Some(name) = arg.get_env().and_then(|n| n.to_str()) {
                into.push(name.to_string());
            }
        }
        for sub in command.get_subcommands() {
            env_names(sub, into);
        }
    }
    let mut known = Vec::new();
    env_names(command, &mut known);
    known.extend(SCRIPT_VARIABLES.iter().map(|s| s.to_string()));
    let mut unknown: Vec<String> = set
        .filter(|name| name.starts_with("EVENTBOX_") && !known.contains(name))
        .filter(|name| !SERVICE_LINKS.iter().any(|p| name.starts_with(p)))
        .collect();
    unknown.sort();
    unknown
        .into_iter()
        .map(|name| match crate::problem::closest(&name, &known, 0.9) {
            Some(k) => {
                format!("{name} is not a variable eventbox reads; did you mean {k}?")
            }
            None => format!(
                "{name} is not a variable eventbox reads (`eventbox serve --help` lists them)"
            ),
        })
        .collect()
}

/// The command line as parsed, given its first argument. `eventbox` alone reads serve's
/// variables at the top; with a subcommand they belong to it, so the top's are turned off (a
/// bad `EVENTBOX_IDLE_TIMEOUT` stopped `eventbox check`, and a flag given to `serve` did not
/// win over its variable). An empty variable counts as unset (Compose's `${VAR}` of an unset
/// variable), and so does a [`service_link`].
fn command_for(first: Option<&std::ffi::OsStr>) -> clap::Command {
    fn unset_unread(command: clap::Command) -> clap::Command {
        let subcommands: Vec<String> = command
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .collect();
        let mut command = command.mut_args(|arg| {
            let unread = arg.get_env().is_some_and(|name| {
                std::env::var_os(name).is_some_and(|v| v.is_empty() || service_link(name, &v))
            });
            if unread {
                arg.env(None::<&'static str>)
            } else {
                arg
            }
        });
        for name in subcommands {
            command = command.mut_subcommand(name, unset_unread);
        }
        command
    }
    let command = unset_unread(Cli::command());
    let subcommand =
        first.is_some_and(|first| command.find_subcommand(first).is_some() || first == "help");
    if subcommand {
        command.mut_args(|arg| arg.env(None::<&'static str>))
    } else {
        command
    }
}

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}

/// `eventbox completions <shell>`: the completion script on `out`.
pub fn completions(args: &CompletionsArgs, out: &mut impl std::io::Write) -> std::io::Result<()> {
    // Generated in memory: clap_complete panics when its writer fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "eventbox", &mut script);
    out.write_all(&script)?;
    out.flush()
}

/// `eventbox man`: the man page, in roff, on `out`.
pub fn man(out: &mut impl std::io::Write) -> std::io::Result<()> {
    clap_mangen::Man::new(Cli::command()).render(out)
}

#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// The data folder to check.
    #[arg(default_value = "data", env = "EVENTBOX_DATA")]
    pub dir: PathBuf,
    /// Count warnings as errors.
    #[arg(long)]
    pub strict: bool,
    /// The largest bundle file read, in bytes; a larger one is an error
    #[arg(long, env = "EVENTBOX_MAX_FILE_BYTES", value_name = "N",
          default_value_t = crate::read::DEFAULT_MAX_FILE_BYTES)]
    pub max_file_bytes: u64,
    /// The longest simulated delay `serve` will take (as its --max-delay): a bundle's longer
    /// simulated delay is a warning
    #[arg(long, env = "EVENTBOX_MAX_DELAY", value_parser = crate::config::parse_duration,
          default_value = "30s")]
    pub max_delay: std::time::Duration,
    /// Lines for people (text) or one JSON document for CI (json; see docs/operations.md)
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    pub format: CheckFormat,
}

/// How `check` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckFormat {
    Text,
    Json,
}

/// `eventbox pull`: 0 when the new copy is in place, 1 when the pull failed (the earlier copy
/// is untouched), 2 when the options cannot be used. Ctrl-C (130) and SIGTERM (143) stop it the
/// same way: the pull is dropped, which removes its staging folder.
pub async fn pull(args: &crate::pull::PullOptions) -> u8 {
    use crate::pull::PullError;
    let mut options = args.clone();
    // `--into s3://bucket/prefix/NAME`: pulled into a temporary folder as usual (the same checks
    // before anything is written), then published there, its manifest first (src/mirror.rs).
    let publish = match crate::mirror::Source::parse(&args.into) {
        None => None,
        Some(Err(e)) => {
            eprintln!("eventbox pull: {e}");
            return EXIT_UNUSABLE;
        }
        Some(Ok(target)) => {
            let Some((parent, name)) = target.parent_and_name() else {
                eprintln!(
                    "eventbox pull: --into {target}: name the bundle, as s3://bucket/prefix/NAME"
                );
                return EXIT_UNUSABLE;
            };
            let published = match crate::mirror::Target::new(&parent, &name, args.timeout) {
                Ok(published) => published,
                Err(e) => {
                    eprintln!("eventbox pull: {e}");
                    return EXIT_UNUSABLE;
                }
            };
            match tempfile::Builder::new().prefix("eventbox-pull").tempdir() {
                Ok(folder) => {
                    options.into = folder.path().join(&name);
                    Some((published, parent, name, folder))
                }
                Err(e) => {
                    eprintln!("eventbox pull: cannot create a temporary folder: {e}");
                    return 1;
                }
            }
        }
    };
    // Pulled, then published: one run, which Ctrl-C and SIGTERM stop at any point of either.
    let work = async {
        if let Some((published, ..)) = &publish {
            if let Err(e) = published.check(args.force).await {
                eprintln!("eventbox pull: {e}");
                return match e {
                    crate::mirror::TargetError::Refused(_) => EXIT_UNUSABLE,
                    crate::mirror::TargetError::Unreachable(_) => 1,
                };
            }
        }
        let summary = match crate::pull::run(&options).await {
            Ok(summary) => summary,
            Err(e) => {
                eprintln!("eventbox pull: {e}");
                return match e {
                    PullError::BadBase { .. }
                    | PullError::BadTarget { .. }
                    | PullError::BadToken(_)
                    | PullError::BadApp(_)
                    | PullError::BadConcurrency
                    | PullError::BadTimeout(_) => EXIT_UNUSABLE,
                    _ => 1,
                };
            }
        };
        say(format_args!("{summary}"));
        let Some((published, target, name, folder)) = &publish else {
            return 0;
        };
        let dir = folder.path().join(name);
        match published.publish(&dir, args.force).await {
            Ok(files) => {
                say(format_args!(
                    "published {files} files to {target}/{name}, its manifest first"
                ));
                0
            }
            Err(e) => {
                eprintln!("eventbox pull: {e}");
                1
            }
        }
    };
    tokio::select! {
        code = work => code,
        stop = stop_signal(true) => {
            let name = stop.name();
            if publish.is_some() {
                eprintln!(
                    "eventbox pull: interrupted ({name}); mirrors keep their last good copy until a publish completes"
                );
            } else {
                eprintln!("eventbox pull: interrupted ({name}); the earlier copy is as it was");
            }
            stop.exit_code()
        }
    }
}

/// `eventbox gen`: 0 when the bundle is in place, 1 when it could not be written, 2 when the
/// options cannot be used. Ctrl-C (130) and SIGTERM (143) stop it and remove its staging folder.
pub async fn gen(args: &crate::gen::GenOptions) -> u8 {
    use crate::gen::GenError;
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let options = crate::gen::GenOptions {
        cancel: Some(std::sync::Arc::clone(&cancel)),
        ..args.clone()
    };
    let stop = stop_signal(true);
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
                GenError::BadTarget { .. } | GenError::BadToken | GenError::TooMany { .. } => {
                    EXIT_UNUSABLE
                }
                _ => 1,
            }
        }
    }
}

/// A file the container image puts in its demo data folder (`scripts/image.sh`, `Dockerfile`):
/// serving a folder that holds it means no bundles were mounted over the demo. Its name starts
/// with `.`, so the loader passes it over.
const IMAGE_DEMO_MARK: &str = ".eventbox-image-demo";

/// `eventbox check`: 0 when clean (or only warnings without `--strict`), 1 on errors, 2 when the
/// folder cannot be read. `--format json` writes one JSON document (docs/operations.md).
pub fn check(args: &CheckArgs, out: &mut impl std::io::Write) -> std::io::Result<u8> {
    let json = args.format == CheckFormat::Json;
    // No compressed variants: nothing is served.
    let reading = Reading {
        compression: false,
        max_file_bytes: args.max_file_bytes,
        max_delay: args.max_delay,
    };
    let catalog = match Catalog::load(&args.dir, reading) {
        Ok(c) => c,
        Err(e) => {
            if json {
                let doc = serde_json::json!({"ok": false, "error": e.to_string()});
                writeln!(out, "{doc}")?;
            } else {
                writeln!(out, "error: {e}")?;
            }
            return Ok(EXIT_UNUSABLE);
        }
    };
    let severity_of = |p: &crate::problem::Problem| {
        if args.strict {
            Severity::Error
        } else {
            p.severity
        }
    };
    let served = catalog.entries().filter(|e| e.serving.is_some()).count();
    let total = catalog.entries().count();
    // A folder with no bundle checks clean, yet `serve` on it is never ready: a warning (a
    // mistyped folder, or its parent, passed before).
    let empty = (total == 0).then(|| {
        format!(
            "{} holds no bundle (a folder of its own per event): serve on it would never be ready",
            args.dir.display()
        )
    });
    let errors = catalog.count(Severity::Error);
    let warnings = catalog.count(Severity::Warning) + usize::from(empty.is_some());
    let failed = errors > 0 || (args.strict && warnings > 0);
    if json {
        let bundles: Vec<serde_json::Value> = catalog
            .entries()
            .map(|entry| {
                let problems: Vec<serde_json::Value> = entry
                    .all_problems()
                    .map(|p| {
                        let mut v = serde_json::json!({
                            "severity": severity_of(p).as_str(),
                            "file": p.file.display().to_string(),
                        });
                        match &p.location {
                            Location::File => {}
                            Location::Text { line, column } => {
                                v["line"] = (*line).into();
                                v["column"] = (*column).into();
                            }
                            Location::Path(path) => v["path"] = path.as_str().into(),
                        }
                        v["message"] = p.message.as_str().into();
                        v
                    })
                    .collect();
                serde_json::json!({
                    "name": entry.name,
                    "served": entry.serving.is_some(),
                    "problems": problems,
                })
            })
            .collect();
        let mut doc = serde_json::json!({
            "ok": !failed,
            "strict": args.strict,
            "bundles": bundles,
            "summary": {
                "bundles": total,
                "served": served,
                "errors": errors,
                "warnings": warnings,
            },
        });
        if let Some(empty) = &empty {
            doc["warning"] = empty.as_str().into();
        }
        writeln!(out, "{doc}")?;
        return Ok(u8::from(failed));
    }
    for entry in catalog.entries() {
        for p in entry.all_problems() {
            writeln!(out, "{}: {p}", severity_of(p).as_str())?;
        }
    }
    if let Some(empty) = &empty {
        let severity = if args.strict { "error" } else { "warning" };
        writeln!(out, "{severity}: {empty}")?;
    }
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
/// SIGTERM. `/readyz` answers 503 until the first load is published. Logging is already set up:
/// every message goes through it, in the chosen format.
pub async fn serve(options: &ServeOptions) -> u8 {
    let report = Report(options.log_format);
    // `--data s3://bucket/prefix`: the bundles are mirrored into a local folder (under
    // `--state`, else a temporary one), which is what is served; the mirror reloads, not a
    // watcher (src/mirror.rs).
    let mut mirrored = options.clone();
    // Where bundles are added: the folder, or the object storage a mirror copies them from.
    let bundles_at = options.data.display().to_string();
    let mut _mirror_tmp = None;
    let mut mirror = None;
    if let Some(source) = crate::mirror::Source::parse(&options.data) {
        let source = match source {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("{e}");
                return EXIT_UNUSABLE;
            }
        };
        let dir = match &options.state {
            Some(state) => state.join("mirror"),
            None => match tempfile::Builder::new().prefix("eventbox-mirror").tempdir() {
                Ok(t) => _mirror_tmp.insert(t).path().to_path_buf(),
                Err(e) => {
                    tracing::error!(
                        "cannot create a folder to mirror {source} into: {e}; give --state DIR, \
                         a writable folder (in the image: a volume at /state)"
                    );
                    return EXIT_UNUSABLE;
                }
            },
        };
        match crate::mirror::Mirror::new(source.clone(), dir, options.store_timeout) {
            Ok(m) => {
                tracing::info!(
                    source = %source,
                    mirror = %m.dir().display(),
                    every = %humantime::format_duration(options.poll_interval),
                    "bundles mirrored from object storage"
                );
                mirrored.data = m.dir().to_path_buf();
                mirrored.no_watch = true;
                mirror = Some(m);
            }
            Err(e) => {
                tracing::error!("{e}");
                return EXIT_UNUSABLE;
            }
        }
    }
    let options = &mirrored;
    // Fail fast, before binding, when the folder is not there at all.
    if let Err(e) = crate::load::bundle_names(&options.data) {
        tracing::error!("{e}");
        return EXIT_UNUSABLE;
    }
    if mirror.is_none() {
        let data = std::path::absolute(&options.data).unwrap_or_else(|_| options.data.clone());
        tracing::info!(data = %data.display(), "bundles from {}", data.display());
        if data.join(IMAGE_DEMO_MARK).exists() {
            tracing::warn!(
                "{} is the demo bundle built into the image, not bundles of yours: mount your \
                 folder over it (docker run -v DIR:{}:ro), or point --data at where it is mounted",
                data.display(),
                data.display()
            );
        }
    }
    // The SIGHUP handler exists before the port opens: a SIGHUP never finds the default action
    // (which ends the process).
    let app = match App::with_options(options) {
        Ok(app) => app,
        Err(e) => {
            tracing::error!("{e}");
            return EXIT_UNUSABLE;
        }
    };
    if let Some(m) = &mirror {
        // Problems name the objects in storage, not the mirror's copies of them.
        app.reloader.set_files_from(m.source().to_string());
    }
    spawn_sighup_reloads(&app);
    // Kiosk mode queues writes for their source from the first one on (the forwarder starts
    // after the first load, and the port opens before it).
    if options.refresh_every.is_some() && options.state.is_some() {
        app.writes.forward_from_now();
    }
    // Before the port opens: a state folder that cannot be used stops the start before
    // anything says it is listening.
    match app.open_state() {
        Ok(Some(state)) => {
            let crate::app::Queued {
                waiting: pending,
                parked,
                refused: rejected,
            } = state.queue;
            tracing::info!(
                log = %state.path.display(),
                lines = state.lines,
                writes = state.writes,
                pending,
                parked,
                rejected,
                "writes are kept in the state folder"
            );
            if pending > 0 && options.refresh_every.is_none() {
                tracing::warn!(
                    pending,
                    "writes from an earlier kiosk run wait for their source: they are kept, and \
                     sent only when this folder is served in kiosk mode (--refresh-every)"
                );
            }
            if let Some(crate::app::Lost { logged, forwarded }) = state.lost {
                tracing::error!(
                    logged,
                    forwarded,
                    "forwarded.jsonl names writes up to seq {forwarded}, past the log's last \
                     ({logged}): the log lost lines it had saved (a disk that did not keep what \
                     it synced, or a file cut by hand); what the source took of them is at the \
                     source, the rest is gone; new writes are numbered from {}",
                    forwarded + 1
                );
            }
            if let Some(aside) = &state.torn {
                // A crash cuts only a line not yet acknowledged; with lines lost, the disk
                // lost more than a crash does.
                let how = match state.lost {
                    None => "cut short by a crash (it was never acknowledged)",
                    Some(_) => "damaged",
                };
                tracing::warn!(
                    aside = %aside.display(),
                    "the log's last write was {how}; copied aside"
                );
            }
        }
        Ok(None) => {}
        Err(e) => {
            tracing::error!("cannot use the --state folder: {e}; nothing is served");
            return EXIT_UNUSABLE;
        }
    }
    let wanted = options.listen_addr();
    let listener = match TcpListener::bind(wanted).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("cannot listen on {wanted}: {e}");
            return EXIT_UNUSABLE;
        }
    };
    let addr = listener.local_addr().map_or(wanted, |a| a);
    // Before the address line, which tells a supervisor (or a test) that the process is up: a
    // SIGTERM sent once it reads the line is a graceful stop.
    let shutdown = shutdown_signal();
    report.line(
        &format!("eventbox listening on http://{addr}"),
        serde_json::json!({"addr": addr.to_string(), "url": format!("http://{addr}")}),
    );
    if options.allow_control_headers {
        tracing::warn!(
            "control headers are obeyed: any client may delay, fail or break its answers"
        );
    }
    match &options.admin_token {
        // Never the token, not even its hint: it is the one secret of the whole server.
        Some(_) => tracing::info!(
            "admin token set: /status and the /_ routes (/_journal, /_writes/reset, /_queue) \
             answer clients other than loopback that send it as Authorization: Bearer"
        ),
        None if !crate::http::admin::is_loopback(addr.ip()) => tracing::info!(
            "/status and the /_ routes (/_journal, /_writes/reset, /_queue) answer loopback \
             clients only; start with --admin-token to allow remote access"
        ),
        None => {}
    }
    if options.journal > 0 {
        tracing::info!(
            capacity = options.journal,
            "request journal on at /_journal"
        );
    }
    if options.read_only {
        tracing::info!("read-only: writes and resets are refused with 405");
    }
    let mut server = tokio::spawn(crate::http::serve(listener, app.service(), shutdown));
    // Watch before the first load, so that nothing changed in between is missed (a change seen
    // during the load only reloads once more).
    let _watcher = match app.watch_as_configured().await {
        Ok(w) => w,
        Err(e) => {
            tracing::warn!("{e}; changes are picked up on SIGHUP only");
            None
        }
    };
    // From object storage: /readyz stays 503 until the first complete sync.
    let _mirroring = match mirror {
        Some(mut m) => {
            loop {
                // A stop during the first sync does not wait for it either.
                let polled = tokio::select! {
                    polled = m.poll(&app.reloader) => polled,
                    done = &mut server => return stopped(done, Some("sync")),
                };
                match polled {
                    Ok(_) => break,
                    Err(e) => tracing::error!(
                        "{e}; not ready until the first sync succeeds (retried every {})",
                        humantime::format_duration(options.poll_interval)
                    ),
                }
                tokio::select! {
                    () = tokio::time::sleep(options.poll_interval) => {}
                    done = &mut server => return stopped(done, Some("sync")),
                }
            }
            Some(crate::mirror::spawn(
                m,
                options.poll_interval,
                std::sync::Arc::clone(&app.reloader),
            ))
        }
        None => None,
    };
    let loader = app.clone();
    let load = tokio::task::spawn_blocking(move || loader.load());
    // A stop during the first load (a large bundle takes seconds) does not wait for it: nothing
    // is served yet, and the load only reads.
    let loaded = tokio::select! {
        loaded = load => loaded,
        done = &mut server => return stopped(done, Some("load")),
    };
    match loaded {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            tracing::error!("{e}");
            return EXIT_UNUSABLE;
        }
        Err(e) => {
            tracing::error!("the first load failed: {e}");
            return 1;
        }
    }
    let _refresher = app.refresh_as_configured();
    // Writes made here go to their bundle's source, when it names one, in kiosk mode only: a
    // copy pulled from the live service names it too, and a rehearsal or staging server on it
    // with --state would register its test people there.
    let _forwarder = options
        .refresh_every
        .and_then(|_| app.forward_as_configured());
    if options.state.is_some() && options.refresh_every.is_none() && !options.read_only {
        // Said only where a bundle names a source: on a plain server it would read as a fault.
        let mut named: Vec<String> = app.sources.all().into_iter().map(|(n, _)| n).collect();
        named.sort();
        if !named.is_empty() {
            tracing::info!(
                bundles = named.join(", "),
                "writes made here are kept in the state folder and not sent to the [source] \
                 these bundles name: that is kiosk mode's (--refresh-every)"
            );
        }
    }
    if options.refresh_every.is_some() && options.state.is_none() && !options.read_only {
        // The operator of a desk must hear it before the first check-in, not after a restart.
        tracing::warn!(
            "writes made here are kept in memory only: they are never sent to the sources and \
             a restart loses them (give --state DIR to keep them on disk and forward them)"
        );
    }
    let printer = app.clone();
    // The catalog's lock is a blocking one: take it off the async threads.
    let _ = tokio::task::spawn_blocking(move || print_bundles(&printer, &bundles_at, report)).await;

    stopped(server.await, None)
}

/// The exit code of the server once it stopped, said in the log; `before`: it stopped before
/// the first load or sync from object storage was done (nothing was served yet, and that
/// work only reads, so it is not waited for).
fn stopped(
    stopped: Result<std::io::Result<()>, tokio::task::JoinError>,
    before: Option<&str>,
) -> u8 {
    match stopped {
        Ok(Ok(())) => {
            match before {
                Some(what) => tracing::info!("stopped before the first {what} was done"),
                None => tracing::info!("stopped"),
            }
            0
        }
        Ok(Err(e)) => {
            tracing::error!("{e}");
            1
        }
        Err(e) => {
            tracing::error!("the server stopped: {e}");
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

/// `serve`'s startup lines on stdout (the address, then the bundles): plain text, or with
/// `--log-format json` one JSON object per line shaped as the JSON log lines are (`timestamp`,
/// `level`, `fields` with `message` and the values, `target`).
#[derive(Debug, Clone, Copy)]
struct Report(LogFormat);

impl Report {
    fn line(self, message: &str, mut fields: serde_json::Value) {
        match self.0 {
            LogFormat::Text => say(format_args!("{message}")),
            LogFormat::Json => {
                fields["message"] = message.into();
                let timestamp =
                    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
                let line = serde_json::json!({
                    "timestamp": timestamp,
                    "level": "INFO",
                    "fields": fields,
                    "target": "eventbox",
                });
                say(format_args!("{line}"));
            }
        }
    }
}

/// The bundles served, or why none is; `bundles_at` is where one is added (`--data`).
fn print_bundles(app: &App, bundles_at: &str, report: Report) {
    app.reloader.with_catalog(|catalog| {
        let mut any = false;
        for entry in catalog.entries() {
            let Some(version) = &entry.serving else {
                continue;
            };
            any = true;
            let first = version.tokens.first().map(Token::hint).unwrap_or_default();
            report.line(
                &format!("  bundle {:<20} token {first}", entry.name),
                serde_json::json!({"bundle": entry.name, "token": first}),
            );
        }
        if !any {
            let data = bundles_at;
            // Read from the files: the refresher takes each bundle's source on its first round,
            // which may come after this line.
            let following = app.options().refresh_every.is_some()
                && catalog.entries().any(|e| {
                    e.serving.is_none() && crate::kiosk::refresh::named_source(&e.dir).is_some()
                });
            let why = if following {
                // A desk set up with a bundle.toml alone: its files come with the first refresh.
                "every bundle has errors (logged above), or waits for its source's first refresh \
                 (a desk set up with bundle.toml alone: its files are missing until then); \
                 /readyz is 503 until one is served"
                    .to_string()
            } else if catalog.entries().next().is_some() {
                "every bundle has errors (logged above; /readyz is 503 until one is served)"
                    .to_string()
            } else {
                format!("add one under {data} (/readyz is 503 until one is served)")
            };
            report.line(
                &format!("  no bundle is served: {why}"),
                serde_json::json!({"data": data}),
            );
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
                // A failed reload logged its reason already.
                if let Ok(Ok(refreshed)) = tokio::task::spawn_blocking(move || app.load()).await {
                    tracing::info!(
                        bundles = refreshed.loaded.len(),
                        "SIGHUP: every bundle reloaded"
                    );
                }
            }
        });
    }
    #[cfg(not(unix))]
    let _ = app;
}

/// The signal that asked the process to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Ctrl-C (SIGINT).
    Interrupt,
    /// SIGTERM (`timeout`, systemd, Kubernetes).
    Terminate,
    /// The terminal went away (a dropped ssh session): `pull` and `gen` stop as for Ctrl-C.
    Hangup,
}

impl Stop {
    /// The shell's convention: 128 + the signal's number.
    pub(crate) fn exit_code(self) -> u8 {
        match self {
            Stop::Interrupt => 130,
            Stop::Terminate => 143,
            Stop::Hangup => 129,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Stop::Interrupt => "Ctrl-C",
            Stop::Terminate => "SIGTERM",
            Stop::Hangup => "SIGHUP",
        }
    }
}

/// Completes on Ctrl-C or SIGTERM, saying which. On unix the handlers are installed when this is
/// called (inside a runtime), not when the future is first polled, so work started after the call
/// is covered from its first instant.
///
/// With `hangup`, SIGHUP stops too (`pull` and `gen`: a closed terminal or a dropped ssh
/// session left their staging folder behind); `serve` keeps SIGHUP for reloading.
pub(crate) fn stop_signal(hangup: bool) -> impl std::future::Future<Output = Stop> + Send {
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
        // Not under `nohup` (SIGHUP ignored from the start): listening would undo that.
        let hangup = recv(
            (hangup && !hangup_ignored())
                .then(|| signal(SignalKind::hangup()).ok())
                .flatten(),
        );
        async move {
            tokio::select! {
                () = interrupt => Stop::Interrupt,
                () = terminate => Stop::Terminate,
                () = hangup => Stop::Hangup,
            }
        }
    }
    #[cfg(not(unix))]
    async move {
        let _ = hangup;
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
        Stop::Interrupt
    }
}

/// Whether SIGHUP was ignored when the process started (`nohup`): Linux's
/// `/proc/self/status` says (`SigIgn`, bit 0 for SIGHUP); elsewhere it counts as ignored, so
/// only Ctrl-C and SIGTERM stop.
#[cfg(unix)]
fn hangup_ignored() -> bool {
    if cfg!(not(target_os = "linux")) {
        return true;
    }
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return true;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_none_or(|mask| mask & 1 == 1)
}

/// Completes on Ctrl-C or SIGTERM.
/// The handlers are installed when this is called, not when it is first polled: from then on a
/// SIGTERM stops the server gracefully instead of killing the process.
pub(crate) fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send {
    let stop = stop_signal(false);
    async move {
        stop.await;
        tracing::info!("shutting down: no new connections; requests in flight may finish");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_and_gen_take_their_library_defaults_from_no_flags() {
        // The defaults are written twice, in the flags' attributes and in `new`: held equal here.
        let parsed = |args: &[&str]| {
            Cli::try_parse_from(args)
                .map(|cli| format!("{:?}", cli.command))
                .unwrap_or_else(|e| e.to_string())
        };
        let pull = crate::pull::PullOptions::new("https://h", "t0ken", "d/x");
        assert_eq!(
            parsed(&[
                "eventbox",
                "pull",
                "--from",
                "https://h",
                "--token",
                "t0ken",
                "--into",
                "d/x"
            ]),
            format!("{:?}", Some(Command::Pull(Box::new(pull))))
        );
        let gen = crate::gen::GenOptions::new("d/x");
        assert_eq!(
            parsed(&["eventbox", "gen", "--into", "d/x"]),
            format!("{:?}", Some(Command::Gen(gen)))
        );
    }

    #[test]
    fn a_variable_no_option_reads_is_said_with_the_closest_one() {
        let set = [
            "EVENTBOX_POLL_INTERVALL",
            "EVENTBOX_DATA",
            "EVENTBOX_TOKEN",
            "EVENTBOX_IMAGE",
            "EVENTBOX_WHATEVER_ELSE",
            "EVENTBOX_SERVICE_HOST",
            "EVENTBOX_URL",
            "PATH",
        ]
        .map(String::from);
        assert_eq!(
            unknown_variables(&Cli::command(), set.into_iter()),
            [
                "EVENTBOX_POLL_INTERVALL is not a variable eventbox reads; did you mean \
                 EVENTBOX_POLL_INTERVAL?",
                "EVENTBOX_WHATEVER_ELSE is not a variable eventbox reads (`eventbox serve --help` \
                 lists them)",
            ]
        );
    }

    #[test]
    fn the_command_line_is_well_formed_and_short_flags_do_not_clash() {
        // clap's own checks: no two arguments with one short or long flag, defaults that parse.
        Cli::command().debug_assert();
        let serve = Cli::command();
        let shorts: Vec<char> = serve
            .get_arguments()
            .filter_map(|a| a.get_short())
            .collect();
        for short in ['d', 'a', 'p', 'c', 'w', 'v', 'q'] {
            assert_eq!(
                shorts.iter().filter(|s| **s == short).count(),
                1,
                "-{short}"
            );
        }
    }
}
