//! `serve`'s options: one struct, [`ServeOptions`], that clap fills from flags and `EVENTBOX_*`
//! variables and serde fills from the TOML file given by `--config`, whose keys are the flags'
//! long names (`idle-timeout = "60s"`, `cors-origin = ["..."]`).
//!
//! Precedence is flag > variable > file > default. `ServeOptions::resolve` applies it from
//! clap's own record of where each value came from (`ArgMatches::value_source`), so an option
//! is declared once, on its field, and never merged by hand. The file is checked first, with
//! every error naming the file, the line and the key ([`ConfigError::File`]). Every duration,
//! here and in `pull`, goes through `parse_duration`.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches};
use serde::{Deserialize, Serialize};

use crate::http::cors::Cors;
use crate::http::Limits;
use crate::token::Token;
use crate::watch::WatchMode;

/// The port when neither `--port`, `--addr` nor `PORT` gives one.
pub(crate) const DEFAULT_PORT: u16 = 8080;

/// The shortest debounce, poll interval and timeout accepted: below it the watcher would spin.
pub(crate) const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The longest duration any option takes: a year, as humantime reads `1y` (365.25 days; before,
/// 365 days, so `1y` itself was refused as longer than a year). Past it nothing is meant, and
/// added to a clock's now a duration can overflow (`--idle-timeout` of u64::MAX seconds stopped
/// the server at its first connection).
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(31_557_600);

/// The smallest `--max-header-bytes`: hyper's HTTP/1 floor.
pub(crate) const MIN_HEADER_BYTES: usize = 8192;

/// The shortest `--refresh-every`: each refresh asks the source for every endpoint.
pub(crate) const MIN_REFRESH: Duration = Duration::from_millis(100);

/// The most requests `--journal` may keep.
pub(crate) const MAX_JOURNAL: usize = crate::http::journal::MAX_CAPACITY;

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// The least severe log lines written.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Off,
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    const ALL: [LogLevel; 6] = [
        LogLevel::Off,
        LogLevel::Error,
        LogLevel::Warn,
        LogLevel::Info,
        LogLevel::Debug,
        LogLevel::Trace,
    ];

    /// The level as an `EnvFilter` directive.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Off => "off",
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// How to watch, as written in flags and the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WatchKind {
    /// The platform's file events (inotify...).
    Native,
    /// Scan the folder every --poll-interval (network shares, some container volumes).
    Poll,
    /// Do not watch (SIGHUP still reloads).
    Off,
}

/// On or off, as written in flags and the file (where TOML's `true` and `false` say it too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Switch {
    On,
    Off,
}

impl<'de> Deserialize<'de> for Switch {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Switch, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged, expecting = "expected `on` or `off` (or true or false)")]
        enum Written {
            Bool(bool),
            Word(String),
        }
        match Written::deserialize(d)? {
            Written::Bool(true) => Ok(Switch::On),
            Written::Bool(false) => Ok(Switch::Off),
            Written::Word(w) if w.eq_ignore_ascii_case("on") => Ok(Switch::On),
            Written::Word(w) if w.eq_ignore_ascii_case("off") => Ok(Switch::Off),
            Written::Word(w) => Err(serde::de::Error::custom(format!(
                "expected `on` or `off` (or true or false), not {w:?}"
            ))),
        }
    }
}

/// Where to listen: an IP address or `localhost`, with or without a port (`0.0.0.0`,
/// `127.0.0.1:8080`, `localhost:8080`, `[::1]:8080`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ListenAddr {
    pub host: IpAddr,
    /// `None`: the port comes from `--port`, `PORT` or 8080.
    pub port: Option<u16>,
}

impl FromStr for ListenAddr {
    type Err = String;

    /// `HOST:PORT` or `HOST`, the host an IP address or `localhost` (127.0.0.1, as the default
    /// is; no other name is looked up: a listening address should not depend on a resolver).
    fn from_str(text: &str) -> Result<ListenAddr, String> {
        let t = text.trim();
        if let Some(rest) = t
            .get(..9)
            .filter(|h| h.eq_ignore_ascii_case("localhost"))
            .map(|_| &t[9..])
        {
            let port = match rest.strip_prefix(':') {
                Some(p) => Some(
                    p.parse::<u16>()
                        .ok()
                        .filter(|_| p.bytes().all(|b| b.is_ascii_digit()))
                        .ok_or_else(|| {
                            format!(
                                "{text:?} is not an address: {p:?} is not a port number (0 to 65535)"
                            )
                        })?,
                ),
                None if rest.is_empty() => None,
                None => return Err(not_an_address(text)),
            };
            return Ok(ListenAddr {
                host: IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
                port,
            });
        }
        if let Ok(socket) = t.parse::<SocketAddr>() {
            return Ok(ListenAddr {
                host: socket.ip(),
                port: Some(socket.port()),
            });
        }
        let bare = t.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
        match bare.unwrap_or(t).parse::<IpAddr>() {
            Ok(host) => Ok(ListenAddr { host, port: None }),
            Err(_) => Err(not_an_address(text)),
        }
    }
}

fn not_an_address(text: &str) -> String {
    format!(
        "{text:?} is not an address: write HOST:PORT or HOST with an IP address or localhost, \
         e.g. 127.0.0.1:8080, 0.0.0.0, localhost:8080 or [::1]:8080"
    )
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.port, self.host) {
            (Some(port), host) => write!(f, "{}", SocketAddr::new(host, port)),
            (None, IpAddr::V6(host)) => write!(f, "[{host}]"),
            (None, IpAddr::V4(host)) => write!(f, "{host}"),
        }
    }
}

impl TryFrom<String> for ListenAddr {
    type Error = String;
    fn try_from(text: String) -> Result<ListenAddr, String> {
        text.parse()
    }
}

impl From<ListenAddr> for String {
    fn from(addr: ListenAddr) -> String {
        addr.to_string()
    }
}

/// Everything `eventbox serve` runs with. Flags, `EVENTBOX_*` variables and the configuration
/// file fill this one struct when the binary reads them; [`ServeOptions::default`] holds the
/// defaults. In code, set its fields (each named as its flag, `--max-delay` is `max_delay`) and
/// give it to [`crate::app::App::with_options`], which refuses what `serve` would.
#[derive(Debug, Clone, PartialEq, Eq, Args, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields, default)]
pub struct ServeOptions {
    /// The data folder: one sub-folder per bundle
    #[arg(
        short,
        long,
        env = "EVENTBOX_DATA",
        value_name = "DIR",
        default_value = "data"
    )]
    pub data: PathBuf,
    /// Where to listen: HOST:PORT, or HOST alone (the port then comes from --port, PORT or
    /// 8080) [default: 127.0.0.1, on that port]
    #[arg(short, long, env = "EVENTBOX_ADDR", value_name = "HOST[:PORT]")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<ListenAddr>,
    /// The port to listen on, replacing the one in --addr (0: any free port) [default: the PORT
    /// variable when --addr has no port, else 8080]
    #[arg(short, long, env = "EVENTBOX_PORT")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// How to notice changed files
    #[arg(short, long, env = "EVENTBOX_WATCH", value_enum, default_value_t = WatchKind::Native)]
    pub watch: WatchKind,
    /// Do not watch the data folder (SIGHUP still reloads); the same as --watch off
    #[arg(long, env = "EVENTBOX_NO_WATCH", action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_value_t = false, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub no_watch: bool,
    /// How often --watch poll scans, e.g. 500ms or 2s; with --data s3://..., how often object
    /// storage is listed
    #[arg(long, env = "EVENTBOX_POLL_INTERVAL", value_parser = parse_duration,
          default_value = "250ms")]
    #[serde(with = "duration_text")]
    pub poll_interval: Duration,
    /// With --data s3://...: the longest one request to the store may take; a store that
    /// hangs longer fails that poll (the last good bundles keep serving)
    #[arg(long, env = "EVENTBOX_STORE_TIMEOUT", value_parser = parse_duration,
          default_value = "30s")]
    #[serde(with = "duration_text")]
    pub store_timeout: Duration,
    /// How long changes must settle before a reload, e.g. 100ms
    #[arg(long, env = "EVENTBOX_DEBOUNCE", value_parser = parse_duration, default_value = "100ms")]
    #[serde(with = "duration_text")]
    pub debounce: Duration,
    /// Log lines as text or JSON (the startup lines on stdout too)
    #[arg(long, env = "EVENTBOX_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// The least severe log lines written; given here (or by -v/-q), it wins over RUST_LOG
    /// [default: RUST_LOG, else info]
    #[arg(long, env = "EVENTBOX_LOG_LEVEL", value_enum)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<LogLevel>,
    /// More log lines (-v debug, -vv trace), from --log-level or info
    #[arg(short, long, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    #[serde(skip)]
    pub verbose: u8,
    /// Fewer log lines (-q warn, -qq error, -qqq none), from --log-level or info
    #[arg(short, long, action = clap::ArgAction::Count)]
    #[serde(skip)]
    pub quiet: u8,
    /// Log one line per request (method, path, status, duration, bundle, token hint);
    /// --access-log=false turns off a configuration file's
    #[arg(long, env = "EVENTBOX_ACCESS_LOG", action = clap::ArgAction::Set, num_args = 0..=1,
          require_equals = true, default_value_t = false, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub access_log: bool,
    /// Send gzip and brotli bodies to clients that accept them
    #[arg(long, env = "EVENTBOX_COMPRESSION", value_enum, default_value_t = Switch::On)]
    pub compression: Switch,
    /// Keep bodies of 32 KiB and more in a memory file and send them with sendfile; off keeps
    /// them on the heap (for the whole process, once off)
    #[arg(long, env = "EVENTBOX_MEMORY_FILE", value_enum, default_value_t = Switch::On)]
    pub memory_file: Switch,
    /// An origin allowed to read answers from a browser; repeat it for more; `*` for all, `none`
    /// to turn CORS off
    #[arg(
        long,
        env = "EVENTBOX_CORS_ORIGIN",
        value_name = "ORIGIN",
        value_delimiter = ',',
        default_value = "*"
    )]
    #[serde(deserialize_with = "one_or_many")]
    pub cors_origin: Vec<String>,
    /// Time allowed for a request's headers and for a new connection to show its protocol (also
    /// bounds an idle HTTP/1 connection)
    #[arg(long, env = "EVENTBOX_HEADER_TIMEOUT", value_parser = parse_duration,
          default_value = "10s")]
    #[serde(with = "duration_text")]
    pub header_timeout: Duration,
    /// Close a connection with no traffic for this long
    #[arg(long, env = "EVENTBOX_IDLE_TIMEOUT", value_parser = parse_duration,
          default_value = "60s")]
    #[serde(with = "duration_text")]
    pub idle_timeout: Duration,
    /// The largest request head in bytes
    #[arg(
        long,
        env = "EVENTBOX_MAX_HEADER_BYTES",
        value_name = "N",
        default_value_t = 16384
    )]
    pub max_header_bytes: usize,
    /// Connections served at once; more wait to be accepted
    #[arg(
        long,
        env = "EVENTBOX_MAX_CONNECTIONS",
        value_name = "N",
        default_value_t = 4096
    )]
    pub max_connections: usize,
    /// Connections served at once from one client address; more are closed when accepted
    #[arg(
        long,
        env = "EVENTBOX_MAX_CONNECTIONS_PER_IP",
        value_name = "N",
        default_value_t = 64
    )]
    pub max_connections_per_ip: usize,
    /// Time for a request body to arrive whole, from its first read (408 after it)
    #[arg(long, env = "EVENTBOX_BODY_TIMEOUT", value_parser = parse_duration,
          default_value = "10s")]
    #[serde(with = "duration_text")]
    pub body_timeout: Duration,
    /// The largest bundle file read, in bytes; a larger one is an error of its bundle
    #[arg(
        long,
        env = "EVENTBOX_MAX_FILE_BYTES",
        value_name = "N",
        default_value_t = crate::read::DEFAULT_MAX_FILE_BYTES
    )]
    pub max_file_bytes: u64,
    /// Obey the X-Eventbox-Delay, -Status, -Fault and -Retry-After request headers (for testing
    /// clients; ignored without it); --allow-control-headers=false undoes a file's
    /// allow-control-headers = true
    #[arg(long, env = "EVENTBOX_ALLOW_CONTROL_HEADERS", action = clap::ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value_t = false,
          default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_control_headers: bool,
    /// The longest simulated delay (control headers and bundle simulation), e.g. 5s
    #[arg(long, env = "EVENTBOX_MAX_DELAY", value_parser = parse_duration, default_value = "30s")]
    #[serde(with = "duration_text")]
    pub max_delay: Duration,
    /// Keep the last N requests in memory, listed at GET /_journal (0: off; at most 100000)
    #[arg(long, env = "EVENTBOX_JOURNAL", value_name = "N", default_value_t = 0)]
    pub journal: usize,
    /// Keep acknowledged writes (registrations, check-ins) in an append-only log in DIR, made
    /// durable before each answer and replayed on start; without it writes live in memory only
    #[arg(long, env = "EVENTBOX_STATE", value_name = "DIR")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PathBuf>,
    /// Refuse every write (POST /attendees/create, /checkin/*) and POST /_writes/reset with
    /// 405
    #[arg(long, env = "EVENTBOX_READ_ONLY", action = clap::ArgAction::Set,
          num_args = 0..=1, require_equals = true, default_value_t = false,
          default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub read_only: bool,
    /// A secret that lets clients other than this machine's loopback use /status and the /_
    /// routes (/_journal, /_writes/reset, /_queue), sent as `Authorization: Bearer SECRET`
    /// (without it those answer loopback clients only); never logged or printed
    /// (EVENTBOX_ADMIN_TOKEN keeps it out of the process list)
    #[arg(
        long,
        env = "EVENTBOX_ADMIN_TOKEN",
        value_name = "SECRET",
        hide_env_values = true
    )]
    #[serde(default, skip_serializing_if = "Option::is_none", with = "secret_text")]
    pub admin_token: Option<Token>,
    /// Pull every bundle whose bundle.toml names a source again on this period, e.g. 30s or 5m
    /// (kiosk mode, docs/kiosk.md) [default: off]
    #[arg(long, env = "EVENTBOX_REFRESH_EVERY", value_name = "D", value_parser = parse_duration)]
    #[serde(
        default,
        with = "optional_duration_text",
        skip_serializing_if = "Option::is_none"
    )]
    pub refresh_every: Option<Duration>,
    /// With --refresh-every: a source is offline after this many failed refreshes in a row
    /// (online again after one success)
    #[arg(
        long,
        env = "EVENTBOX_OFFLINE_AFTER",
        value_name = "N",
        default_value_t = 2
    )]
    pub offline_after: u32,
    /// A TOML file with any of these options, keyed by their long names; flags and EVENTBOX_*
    /// variables override it
    #[arg(short, long, env = "EVENTBOX_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
}

impl Default for ServeOptions {
    /// The defaults: what `eventbox serve` runs with when nothing is given (no variable read).
    fn default() -> ServeOptions {
        let command = ServeOptions::augment_args(clap::Command::new("eventbox"))
            .mut_args(|arg| arg.env(None::<&'static str>));
        // The defaults are constants of this file; `defaults_parse` proves they parse.
        command
            .try_get_matches_from(["eventbox"])
            .map_err(|e| e.to_string())
            .and_then(|m| ServeOptions::from_arg_matches(&m).map_err(|e| e.to_string()))
            .unwrap_or_else(|e| panic!("the defaults of ServeOptions do not parse: {e}"))
    }
}

/// A configuration that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A problem at a place in the configuration file.
    #[error("{}:{line}:{column}: {message}", path.display())]
    File {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// A value that cannot be used, whichever way it was given.
    #[error("{0}")]
    Value(String),
}

impl ServeOptions {
    /// The defaults, serving `data`.
    pub fn for_folder(data: impl AsRef<Path>) -> ServeOptions {
        ServeOptions {
            data: data.as_ref().to_path_buf(),
            ..ServeOptions::default()
        }
    }

    /// The options `serve` runs with: what clap parsed (`self`, from flags, variables and
    /// defaults, with `matches` saying which was which) over the `--config` file, the `PORT`
    /// variable applied (see [`ServeOptions::listen_addr`]), every value checked.
    /// With them, a warning for each key of the file a flag or a variable overrides (the
    /// image sets `EVENTBOX_DATA`, `EVENTBOX_ADDR` and `EVENTBOX_LOG_FORMAT`: a file's `data`
    /// is silently beaten by the first otherwise).
    pub(crate) fn resolve(
        self,
        matches: &ArgMatches,
    ) -> Result<(ServeOptions, Vec<String>), ConfigError> {
        self.resolve_with(matches, std::env::var("PORT").ok().as_deref())
    }

    /// [`ServeOptions::resolve`] with the `PORT` variable's value given.
    fn resolve_with(
        self,
        matches: &ArgMatches,
        port: Option<&str>,
    ) -> Result<(ServeOptions, Vec<String>), ConfigError> {
        let given = |id: &str| {
            matches!(
                matches.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            )
        };
        let Some(path) = self.config.clone() else {
            return self.with_port_variable(port).map(|o| (o, Vec::new()));
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let file = parse_file(&path, &text)?;
        let places = file.places.clone();
        let source = |id: &str| match matches.value_source(id)? {
            ValueSource::CommandLine => Some(format!("--{}", id.replace('_', "-"))),
            ValueSource::EnvVariable => Some(format!("EVENTBOX_{}", id.to_uppercase())),
            _ => None,
        };
        // What beats the file's `key` (either spelling): its own flag or variable, or one that
        // decides the same thing: `--watch` the file's `no-watch`, `--no-watch` its `watch`, an
        // `--addr` with a port its `port`. Before, those file keys won over the flags.
        let addr_port = self.addr.is_some_and(|a| a.port.is_some());
        let no_watch = self.no_watch;
        let beaten_by = |key: &str| {
            let id = key.replace('-', "_");
            source(&id).or_else(|| match id.as_str() {
                "no_watch" => source("watch"),
                "watch" if no_watch => source("no_watch"),
                "port" if addr_port => source("addr"),
                _ => None,
            })
        };
        let overridden: Vec<String> = file
            .keys
            .iter()
            .filter_map(|key| {
                let by = beaten_by(key)?;
                let (line, _) = places.get(key).copied().unwrap_or_default();
                Some(format!(
                    "{}:{line}: {key} is not used: {by} is set, and wins over the file",
                    path.display()
                ))
            })
            .collect();
        let options = self.over_file(file, |key| beaten_by(key).is_some())?;
        let options = options.with_port_variable(port).map_err(|e| match e {
            // `--debounce must be ...` about a value the file gave: named at its place there.
            ConfigError::Value(message) => {
                let key = message
                    .strip_prefix("--")
                    .and_then(|m| m.split_once(' '))
                    .filter(|(key, _)| !given(&key.replace('-', "_")));
                match key.and_then(|(key, rest)| Some((key, rest, places.get(key)?))) {
                    Some((key, rest, &(line, column))) => ConfigError::File {
                        path: path.clone(),
                        line,
                        column,
                        message: format!("{key}: {rest}"),
                    },
                    None => ConfigError::Value(message),
                }
            }
            other => other,
        })?;
        Ok((options, overridden))
    }

    /// `self` where `given` says a value was given (flag or variable), the file's values for the
    /// file's keys elsewhere.
    fn over_file(
        self,
        file: FileOptions,
        given: impl Fn(&str) -> bool,
    ) -> Result<ServeOptions, ConfigError> {
        let cannot = |e: &dyn fmt::Display| ConfigError::Value(format!("configuration: {e}"));
        let mut merged = toml::Table::try_from(&self).map_err(|e| cannot(&e))?;
        let from_file = toml::Table::try_from(&file.options).map_err(|e| cannot(&e))?;
        for key in &file.keys {
            if !given(&key.replace('-', "_")) {
                match from_file.get(key) {
                    Some(value) => merged.insert(key.clone(), value.clone()),
                    None => merged.remove(key),
                };
            }
        }
        let mut options: ServeOptions = merged.try_into().map_err(|e| cannot(&e))?;
        // Not file keys: they come from the command line only.
        options.config = self.config;
        options.verbose = self.verbose;
        options.quiet = self.quiet;
        Ok(options)
    }

    /// Takes the `PORT` variable's value as the port when neither `--port` nor `--addr` gives
    /// one, then checks every value.
    fn with_port_variable(mut self, port: Option<&str>) -> Result<ServeOptions, ConfigError> {
        let addr_port = self.addr.and_then(|a| a.port);
        // Empty, it counts as unset, as an empty EVENTBOX_* variable does.
        let port = port.filter(|text| !text.trim().is_empty());
        if let (None, None, Some(text)) = (self.port, addr_port, port) {
            let parsed = text.trim().parse::<u16>().map_err(|_| {
                ConfigError::Value(format!("PORT={text:?} is not a port number (0 to 65535)"))
            })?;
            self.port = Some(parsed);
        }
        self.check()?;
        Ok(self)
    }

    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        // Empty, the folder would be the working directory's "": an error only once serving.
        if self.data.as_os_str().is_empty() {
            return Err(ConfigError::Value(
                "--data names no folder: give the data folder (by default data)".to_string(),
            ));
        }
        let at_least = |name: &str, value: Duration| {
            if value < MIN_INTERVAL {
                Err(ConfigError::Value(format!(
                    "--{name} must be at least {}, not {}",
                    humantime::format_duration(MIN_INTERVAL),
                    humantime::format_duration(value)
                )))
            } else {
                Ok(())
            }
        };
        if self.watch_mode() != WatchMode::Off {
            at_least("poll-interval", self.poll_interval)?;
            at_least("debounce", self.debounce)?;
            // A burst of changes is waited for this long at most: a longer quiet time would
            // never be waited for in full (poll mode has none).
            if self.watch_mode() == WatchMode::Native && self.debounce > crate::watch::MAX_SETTLE {
                return Err(ConfigError::Value(format!(
                    "--debounce must be at most {}, not {}",
                    humantime::format_duration(crate::watch::MAX_SETTLE),
                    humantime::format_duration(self.debounce)
                )));
            }
        }
        if let Some(every) = self.refresh_every {
            if every < MIN_REFRESH {
                return Err(ConfigError::Value(format!(
                    "--refresh-every must be at least {}, not {}",
                    humantime::format_duration(MIN_REFRESH),
                    humantime::format_duration(every)
                )));
            }
            if cfg!(not(feature = "pull")) {
                return Err(ConfigError::Value(
                    "--refresh-every needs eventbox built with the `pull` feature".into(),
                ));
            }
        }
        for (name, value) in [
            ("poll-interval", self.poll_interval),
            ("store-timeout", self.store_timeout),
            ("debounce", self.debounce),
            ("header-timeout", self.header_timeout),
            ("idle-timeout", self.idle_timeout),
            ("body-timeout", self.body_timeout),
            ("max-delay", self.max_delay),
            ("refresh-every", self.refresh_every.unwrap_or_default()),
        ] {
            check_duration(value).map_err(|e| ConfigError::Value(format!("--{name} {e}")))?;
        }
        at_least("header-timeout", self.header_timeout)?;
        at_least("idle-timeout", self.idle_timeout)?;
        at_least("body-timeout", self.body_timeout)?;
        // hyper's HTTP/1 reader takes no less: a smaller limit would be ignored there.
        if self.max_header_bytes < MIN_HEADER_BYTES {
            return Err(ConfigError::Value(format!(
                "--max-header-bytes must be at least {MIN_HEADER_BYTES} (8 KiB), not {}",
                self.max_header_bytes
            )));
        }
        for (name, value) in [
            ("max-connections", self.max_connections as u64),
            ("max-connections-per-ip", self.max_connections_per_ip as u64),
            ("max-file-bytes", self.max_file_bytes),
            ("offline-after", u64::from(self.offline_after)),
        ] {
            if value == 0 {
                return Err(ConfigError::Value(format!("--{name} must be at least 1")));
            }
        }
        if let Some(token) = &self.admin_token {
            // The token itself is never part of a message.
            if token.is_empty() {
                return Err(ConfigError::Value(
                    "--admin-token must not be empty".to_string(),
                ));
            }
            // The documented example's value, copied as it is, would be a published secret.
            if token.expose().starts_with("change-me") {
                return Err(ConfigError::Value(
                    "--admin-token is the documentation's placeholder: set a secret of your own"
                        .to_string(),
                ));
            }
            if !token.expose().bytes().all(|b| b.is_ascii_graphic()) {
                return Err(ConfigError::Value(
                    "--admin-token takes visible ASCII characters only (no spaces): it is sent \
                     in an Authorization header"
                        .to_string(),
                ));
            }
        }
        Cors::parse(&self.cors_origin).map_err(ConfigError::Value)?;
        if self.journal > MAX_JOURNAL {
            return Err(ConfigError::Value(format!(
                "--journal keeps at most {MAX_JOURNAL} requests, not {}",
                self.journal
            )));
        }
        Ok(())
    }

    /// The address to bind (`serve` binds it; an embedder binding its own listener may ask
    /// it): `addr`'s host (default 127.0.0.1) and the first port of `port`, `addr`'s own, the
    /// `PORT` variable (applied when the options are read from the command line) and 8080.
    pub fn listen_addr(&self) -> SocketAddr {
        let host = self
            .addr
            .map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |a| a.host);
        let port = self
            .port
            .or(self.addr.and_then(|a| a.port))
            .unwrap_or(DEFAULT_PORT);
        SocketAddr::new(host, port)
    }

    /// How the data folder is watched (`--no-watch` wins over `--watch`).
    pub(crate) fn watch_mode(&self) -> WatchMode {
        match (self.no_watch, self.watch) {
            (true, _) | (false, WatchKind::Off) => WatchMode::Off,
            (false, WatchKind::Native) => WatchMode::Native,
            (false, WatchKind::Poll) => WatchMode::Poll(self.poll_interval),
        }
    }

    /// Timeouts and caps of the HTTP server.
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            max_header_bytes: self.max_header_bytes,
            max_connections: self.max_connections,
            max_connections_per_ip: self.max_connections_per_ip,
            body_timeout: self.body_timeout,
        }
    }

    /// Which origins may read answers.
    pub(crate) fn cors(&self) -> Cors {
        // Checked when resolved: a list that cannot be used never gets here (if it did, no
        // origin would be allowed rather than every one).
        Cors::parse(&self.cors_origin).unwrap_or(Cors::Off)
    }

    /// Whether answers get gzip and brotli variants.
    pub(crate) fn compression(&self) -> bool {
        self.compression == Switch::On
    }

    /// What the catalog reads and prepares by.
    pub(crate) fn reading(&self) -> crate::catalog::Reading {
        crate::catalog::Reading {
            compression: self.compression(),
            max_file_bytes: self.max_file_bytes,
            max_delay: self.max_delay,
        }
    }

    /// The log filter: a level given by `--log-level` (flag, variable or file), moved by `-v`
    /// and `-q`, wins; otherwise `rust_log` (the `RUST_LOG` variable) when set; otherwise info.
    /// At info, the file-watching crate says only errors: its info and warning lines are its own
    /// housekeeping (a watch it could not remove from a folder already replaced, at every refresh
    /// of a kiosk), not news to an operator; a watch that fails reaches eventbox as an error,
    /// which it reports itself. `-v` (debug) shows them again.
    pub fn log_filter(&self, rust_log: Option<&str>) -> String {
        let rust_log = rust_log.map(str::trim).filter(|s| !s.is_empty());
        match (self.log_level, self.verbose, self.quiet, rust_log) {
            (None, 0, 0, Some(filter)) => filter.to_string(),
            (level, verbose, quiet, _) => {
                let base = level.unwrap_or(LogLevel::Info) as i32;
                let index = (base + i32::from(verbose) - i32::from(quiet)).clamp(0, 5);
                // notify's own lines are housekeeping (a watch it could not remove from a folder
                // a refresh replaced): kept to its errors but at trace, where all is asked for.
                // object_store logs each retry within one request at INFO; the poll that
                // failed says so itself, so those lines wait for debug.
                match LogLevel::ALL[index as usize] {
                    LogLevel::Info => "info,notify=error,object_store=warn".to_string(),
                    level @ (LogLevel::Warn | LogLevel::Debug) => {
                        format!("{},notify=error", level.as_str())
                    }
                    level => level.as_str().to_string(),
                }
            }
        }
    }
}

/// What a configuration file gave: its values (defaults elsewhere) and the keys it has.
#[derive(Debug)]
struct FileOptions {
    options: ServeOptions,
    keys: Vec<String>,
    /// Where each key's value starts: (line, column), 1-based.
    places: HashMap<String, (usize, usize)>,
}

/// The keys a configuration file may have: the long names of `serve`'s flags that take a value
/// there (not `--config`, `-v`, `-q`).
fn file_keys() -> Vec<String> {
    match toml::Table::try_from(ServeOptions {
        addr: Some(ListenAddr {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: None,
        }),
        port: Some(0),
        log_level: Some(LogLevel::Info),
        state: Some(PathBuf::new()),
        admin_token: Some(Token::new("-")),
        refresh_every: Some(MIN_REFRESH),
        ..ServeOptions::default()
    }) {
        Ok(table) => table.keys().cloned().collect(),
        Err(_) => Vec::new(),
    }
}

/// Parses and checks a configuration file: a syntax error, an unknown key (with the closest
/// known one) or a value of the wrong type is an error naming the file, line and column.
fn parse_file(path: &Path, text: &str) -> Result<FileOptions, ConfigError> {
    let at = |span: Option<Range<usize>>, message: String| {
        let (line, column) = line_column(text, span.map_or(0, |s| s.start));
        ConfigError::File {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    };
    let table =
        toml::de::DeTable::parse(text).map_err(|e| at(e.span(), first_line(e.message())))?;
    let known = file_keys();
    let (mut keys, mut places) = (Vec::new(), HashMap::new());
    for (key, value) in table.get_ref() {
        let name = key.get_ref().to_string();
        if !known.contains(&name) {
            return Err(at(Some(key.span()), unknown_key(&name, &known)));
        }
        places.insert(name.clone(), line_column(text, value.span().start));
        keys.push(name);
    }
    let options = toml::from_str::<ServeOptions>(text).map_err(|e| {
        let span = e.span();
        let key = span.as_ref().and_then(|s| {
            table.get_ref().iter().find_map(|(k, v)| {
                let around = k.span().start..v.span().end;
                around.contains(&s.start).then(|| k.get_ref().to_string())
            })
        });
        let message = first_line(e.message());
        match key {
            Some(key) => at(span, format!("{key}: {message}")),
            None => at(span, message),
        }
    })?;
    Ok(FileOptions {
        options,
        keys,
        places,
    })
}

/// `unknown key "idle-timout"; did you mean "idle-timeout"?`
fn unknown_key(key: &str, known: &[String]) -> String {
    // What belongs in a bundle's own file, pasted here by mistake.
    if ["tokens", "app_keys", "source", "simulate"].contains(&key) {
        return format!(
            "unknown key {key:?}: `{key}` belongs in a bundle's bundle.toml (docs/bundles.md), \
             not in the server's configuration file"
        );
    }
    // The names of eventbox before 0.2 (`idle_timeout_ms`, `cors_origins`) map to today's.
    let modern = key.replace('_', "-");
    let modern = modern.strip_suffix("-ms").unwrap_or(&modern);
    let modern = if modern == "cors-origins" {
        "cors-origin"
    } else {
        modern
    };
    let closest = known
        .iter()
        .find(|k| k.as_str() == modern)
        .or_else(|| crate::problem::closest(key, known, 0.7));
    // `_ms` keys took milliseconds; today's take a duration with its unit.
    let unit = if key.ends_with("_ms") {
        " (a duration with its unit now, e.g. \"60s\" or \"500ms\")"
    } else {
        ""
    };
    match closest {
        Some(k) => format!("unknown key {key:?}; did you mean {k:?}?{unit}"),
        None => format!(
            "unknown key {key:?}; the keys are the long flags of `eventbox serve`: {}",
            known.join(", ")
        ),
    }
}

/// The first line of a TOML or serde message, Rust's type names said in words (`expected
/// usize`: `expected a whole number`).
fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default().trim_end();
    let Some((before, ty)) = line.rsplit_once("expected ") else {
        return line.to_string();
    };
    let words = match ty {
        "usize" | "u64" => "a whole number from 0",
        "u32" => "a whole number from 0 to 4294967295",
        "u16" => "a whole number from 0 to 65535",
        "u8" => "a whole number from 0 to 255",
        "isize" | "i64" | "i32" | "i16" | "i8" => "a whole number",
        "f64" | "f32" => "a number",
        _ => return line.to_string(),
    };
    format!("{before}expected {words}")
}

/// The 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// Parses a duration as people write them: `250ms`, `60s`, `1m30s`, `2h`. A bare number is
/// refused with the units to add, since `60` could mean seconds or milliseconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(format!("{t}: add a unit, e.g. {t}s or {t}ms"));
    }
    let d = humantime::parse_duration(t)
        .map_err(|e| format!("{t:?} is not a duration ({e}); write e.g. 250ms, 60s or 1m30s"))?;
    check_duration(d).map_err(|e| format!("{t:?}: {e}"))?;
    Ok(d)
}

/// Whether a duration is at most [`MAX_DURATION`]; the rule every option's duration follows.
fn check_duration(d: Duration) -> Result<(), String> {
    if d > MAX_DURATION {
        return Err("must be at most a year (1y)".to_string());
    }
    Ok(())
}

/// The admin token in the configuration file: a string. Written back whole only for
/// [`ServeOptions::over_file`]'s merge, in memory; `Debug` shows its hint.
mod secret_text {
    use serde::{Deserialize, Deserializer, Serializer};

    use crate::token::Token;

    pub(crate) fn serialize<S: Serializer>(value: &Option<Token>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(token) => s.serialize_str(token.expose()),
            None => s.serialize_none(),
        }
    }

    /// A string; any other value is refused without being shown (serde's own message quotes a
    /// number or a boolean: `admin-token = 98765432109876` would print the secret).
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Token>, D::Error> {
        let text = String::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "expected a string in quotes (the value is not shown: it is a secret)",
            )
        })?;
        Ok(Some(Token::new(&text)))
    }
}

/// An optional duration in the configuration file, as [`duration_text`].
mod optional_duration_text {
    use std::time::Duration;

    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => super::duration_text::serialize(d, s),
            None => s.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        super::duration_text::deserialize(d).map(Some)
    }
}

/// A list in the file, or one string split at commas as the variable is
/// (`cors-origin = "https://a.example, https://b.example"`).
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(untagged, expecting = "a string or a list of strings")]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match serde::Deserialize::deserialize(d)? {
        OneOrMany::One(text) => text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        OneOrMany::Many(list) => list,
    })
}

/// Durations in the configuration file: text through [`parse_duration`] (a bare number is
/// refused with the same message); written back as humantime's text.
mod duration_text {
    use std::fmt;
    use std::time::Duration;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_duration(*value))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"250ms\", \"60s\" or \"1m30s\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                super::parse_duration(v).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
                Err(E::custom(format!(
                    "{v}: add a unit, e.g. \"{v}s\" or \"{v}ms\""
                )))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
                Err(E::custom(format!(
                    "{v}: add a unit, e.g. \"{v}s\" or \"{v}ms\""
                )))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
                Err(E::custom(format!(
                    "{v}: add a unit, e.g. \"{v}s\" or \"{v}ms\""
                )))
            }
        }
        d.deserialize_any(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// `eventbox serve` as the binary parses it, without reading the environment.
    #[derive(Debug, Parser)]
    struct Serve {
        #[command(flatten)]
        options: ServeOptions,
    }

    fn parse(args: &[&str]) -> (ServeOptions, ArgMatches) {
        let matches = Serve::command()
            .mut_args(|a| a.env(None::<&'static str>))
            .try_get_matches_from(std::iter::once("eventbox").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let options = ServeOptions::from_arg_matches(&matches).expect("options");
        (options, matches)
    }

    fn file(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("eventbox.toml");
        std::fs::write(&path, text).expect("write");
        (dir, path)
    }

    fn resolve(args: &[&str]) -> Result<ServeOptions, ConfigError> {
        resolved(args).map(|(options, _)| options)
    }

    fn resolved(args: &[&str]) -> Result<(ServeOptions, Vec<String>), ConfigError> {
        let (options, matches) = parse(args);
        options.resolve_with(&matches, None)
    }

    #[test]
    fn defaults_parse_and_match_the_servers() {
        let d = ServeOptions::default();
        assert_eq!(d.data, PathBuf::from("data"));
        assert_eq!(d.listen_addr(), "127.0.0.1:8080".parse().expect("addr"));
        assert_eq!(d.watch_mode(), WatchMode::Native);
        assert_eq!(d.limits(), Limits::default());
        assert_eq!(d.max_delay, Duration::from_secs(30));
        assert_eq!(d.cors(), Cors::Any);
        assert!(d.compression() && !d.access_log && !d.allow_control_headers);
        assert_eq!((d.journal, d.debounce), (0, Duration::from_millis(100)));
    }

    #[test]
    fn durations_take_humantime_text_and_refuse_bare_numbers() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(
            parse_duration("60"),
            Err("60: add a unit, e.g. 60s or 60ms".to_string())
        );
        assert_eq!(parse_duration("1y"), Ok(MAX_DURATION));
        assert!(parse_duration("365days 6h 1s").is_err_and(|e| e.contains("at most a year")));
        let long = parse_duration("18446744073709551615s").expect_err("past a year");
        assert!(long.contains("must be at most a year (1y)"), "{long}");
        // Set in code, as a test server's limits are: refused by the same rule.
        let options = ServeOptions {
            idle_timeout: Duration::MAX,
            ..ServeOptions::default()
        };
        let refused = options.check().expect_err("past a year").to_string();
        assert!(
            refused.contains("--idle-timeout must be at most"),
            "{refused}"
        );
        let soon = parse_duration("soon").expect_err("not a duration");
        assert!(soon.contains("write e.g. 250ms, 60s or 1m30s"), "{soon}");
    }

    #[test]
    fn file_keys_are_the_flags_long_names() {
        let keys = file_keys();
        let flags: Vec<String> = Serve::command()
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_string))
            .filter(|l| !["config", "verbose", "quiet"].contains(&l.as_str()))
            .collect();
        let mut sorted_keys = keys.clone();
        sorted_keys.sort();
        let mut sorted_flags = flags;
        sorted_flags.sort();
        assert_eq!(sorted_keys, sorted_flags);
    }

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let (_dir, path) = file(
            "data = \"from-file\"\naddr = \"127.0.0.1:9000\"\nwatch = \"poll\"\n\
             poll-interval = \"1m30s\"\nidle-timeout = \"2m\"\ncors-origin = [\"https://a.example\"]\n",
        );
        let p = path.to_str().expect("UTF-8");

        let from_file = resolve(&["--config", p]).expect("resolves");
        assert_eq!(from_file.data, PathBuf::from("from-file"));
        assert_eq!(
            from_file.listen_addr(),
            "127.0.0.1:9000".parse().expect("a")
        );
        assert_eq!(
            from_file.watch_mode(),
            WatchMode::Poll(Duration::from_secs(90))
        );
        assert_eq!(from_file.idle_timeout, Duration::from_secs(120));
        assert_eq!(from_file.cors_origin, vec!["https://a.example".to_string()]);
        assert_eq!(from_file.debounce, Duration::from_millis(100), "a default");

        let flags =
            resolve(&["-c", p, "-a", "127.0.0.1:7000", "--watch", "native"]).expect("resolves");
        assert_eq!(flags.listen_addr(), "127.0.0.1:7000".parse().expect("a"));
        assert_eq!(flags.watch_mode(), WatchMode::Native);
        assert_eq!(flags.data, PathBuf::from("from-file"));
        assert_eq!(flags.config.as_deref(), Some(path.as_path()));

        let off = resolve(&["-c", p, "--no-watch"]).expect("resolves");
        assert_eq!(off.watch_mode(), WatchMode::Off);

        // What a flag overrides is said, with the file's line (a variable is said the same way:
        // the image's EVENTBOX_DATA beat a file's `data` without a word).
        let (_, warnings) =
            resolved(&["-c", p, "-a", "127.0.0.1:7000", "--watch", "native"]).expect("resolves");
        assert_eq!(
            warnings,
            [
                format!("{p}:2: addr is not used: --addr is set, and wins over the file"),
                format!("{p}:3: watch is not used: --watch is set, and wins over the file"),
            ]
        );
        assert_eq!(
            resolved(&["-c", p]).expect("resolves").1,
            Vec::<String>::new()
        );
    }

    /// A flag beats the file's keys that decide the same thing, not only its own: `--watch` the
    /// file's `no-watch`, an `--addr` with a port the file's `port` (one without a port takes
    /// it). Before, both file keys won over the flags, without a word.
    #[test]
    fn a_flag_beats_the_file_keys_that_decide_the_same_thing() {
        let (_dir, path) = file("no-watch = true\nport = 9000\n");
        let p = path.to_str().expect("UTF-8");
        let (options, warnings) =
            resolved(&["-c", p, "--watch", "native", "-a", "127.0.0.1:7000"]).expect("resolves");
        assert_eq!(options.watch_mode(), WatchMode::Native);
        assert_eq!(options.listen_addr(), "127.0.0.1:7000".parse().expect("a"));
        assert_eq!(
            warnings,
            [
                format!("{p}:1: no-watch is not used: --watch is set, and wins over the file"),
                format!("{p}:2: port is not used: --addr is set, and wins over the file"),
            ]
        );
        let (options, warnings) = resolved(&["-c", p, "-a", "0.0.0.0"]).expect("resolves");
        assert_eq!(options.listen_addr(), "0.0.0.0:9000".parse().expect("a"));
        assert_eq!(options.watch_mode(), WatchMode::Off);
        assert!(warnings.is_empty(), "{warnings:?}");
        // And the other way: `--no-watch` turns off the watch the file names, and says so.
        let (_dir, path) = file("watch = \"poll\"\n");
        let p = path.to_str().expect("UTF-8");
        let (options, warnings) = resolved(&["-c", p, "--no-watch"]).expect("resolves");
        assert_eq!(options.watch_mode(), WatchMode::Off);
        assert_eq!(
            warnings,
            [format!(
                "{p}:1: watch is not used: --no-watch is set, and wins over the file"
            )]
        );
    }

    #[test]
    fn origins_or_a_data_folder_that_say_nothing_or_contradict_themselves_are_refused() {
        for text in [
            "cors-origin = []\n",
            "cors-origin = \"\"\n",
            "cors-origin = \" , \"\n",
        ] {
            let (_dir, path) = file(text);
            let p = path.to_str().expect("utf-8");
            let refused = resolve(&["--config", p]).expect_err(text).to_string();
            assert!(
                refused.contains("cors-origin: names no origin"),
                "{text}: {refused}"
            );
        }
        let (_dir, path) = file("cors-origin = [\"none\", \"https://a.example\"]\n");
        let p = path.to_str().expect("utf-8");
        let refused = resolve(&["--config", p]).expect_err("none and an origin");
        assert!(
            refused.to_string().contains("cannot be given with origins"),
            "{refused}"
        );
        let refused = resolve(&[
            "--cors-origin",
            "none",
            "--cors-origin",
            "https://a.example",
        ])
        .expect_err("none and an origin");
        assert!(
            refused.to_string().contains("cannot be given with origins"),
            "{refused}"
        );
        let (_dir, path) = file("data = \"\"\n");
        let p = path.to_str().expect("utf-8");
        let refused = resolve(&["--config", p]).expect_err("empty data");
        assert!(
            refused.to_string().contains("data: names no folder"),
            "{refused}"
        );
        // `none` alone, twice, or in any case: off.
        let off = resolve(&["--cors-origin", "None", "--cors-origin", "none"]).expect("off");
        assert_eq!(off.cors(), Cors::Off);
    }

    #[test]
    fn cors_origins_are_a_list_or_one_string_and_each_is_checked() {
        let (_dir, path) = file("cors-origin = \"https://a.example, https://b.example\"\n");
        let p = path.to_str().expect("UTF-8");
        let one_string = resolve(&["--config", p]).expect("resolves");
        assert_eq!(
            one_string.cors(),
            Cors::Origins(vec!["https://a.example".into(), "https://b.example".into()])
        );
        let (_dir, path) = file("cors-origin = [\"app.example\"]\n");
        let p = path.to_str().expect("UTF-8");
        // Given as a flag over the file, the flag is named.
        let refused = resolve(&["--config", p, "--cors-origin", "app.example"])
            .expect_err("no scheme")
            .to_string();
        assert_eq!(
            refused,
            "--cors-origin \"app.example\" is not an origin: add its scheme, e.g. \
             https://app.example"
        );
        let flag = resolve(&["--cors-origin", "https://a.example/path"]).expect_err("a path");
        assert!(
            flag.to_string().contains("write https://a.example"),
            "{flag}"
        );
        let (_dir, path) = file("cors-origin = 3\n");
        let wrong_type = resolve(&["--config", path.to_str().expect("UTF-8")])
            .expect_err("a number")
            .to_string();
        assert!(
            wrong_type.contains("cors-origin: a string or a list of strings"),
            "{wrong_type}"
        );
    }

    #[test]
    fn flags_turn_a_files_switches_off() {
        let (_dir, path) = file(
            "access-log = true\nallow-control-headers = true\nmax-delay = \"2s\"\njournal = 50\n",
        );
        let p = path.to_str().expect("UTF-8");
        let from_file = resolve(&["--config", p]).expect("ok");
        assert!(from_file.access_log && from_file.allow_control_headers);
        assert_eq!(from_file.max_delay, Duration::from_secs(2));
        assert_eq!(from_file.journal, 50);
        let flags = resolve(&[
            "--config",
            p,
            "--access-log=false",
            "--allow-control-headers=false",
            "--max-delay",
            "500ms",
            "--journal",
            "0",
        ])
        .expect("ok");
        assert!(!flags.access_log && !flags.allow_control_headers);
        assert_eq!(flags.max_delay, Duration::from_millis(500));
        assert_eq!(flags.journal, 0);
    }

    /// A switch in the file is `on`/`off` as on the command line, or TOML's own booleans (which
    /// were refused with "wanted string or table", naming neither).
    #[test]
    fn a_switch_in_the_file_is_on_off_or_a_boolean() {
        for (value, on) in [
            ("\"on\"", true),
            ("\"off\"", false),
            ("true", true),
            ("false", false),
        ] {
            let (_dir, path) = file(&format!("compression = {value}\n"));
            let got = resolve(&["--config", path.to_str().expect("UTF-8")]).expect(value);
            assert_eq!(got.compression(), on, "{value}");
        }
        for value in ["\"yes\"", "1"] {
            let (_dir, path) = file(&format!("memory-file = {value}\n"));
            let err = resolve(&["--config", path.to_str().expect("UTF-8")])
                .expect_err(value)
                .to_string();
            assert!(err.contains("memory-file: expected `on` or `off`"), "{err}");
        }
    }

    #[test]
    fn an_admin_token_in_the_file_that_is_not_a_string_is_refused_unshown() {
        for value in [
            "98765432109876",
            "-98765432109876",
            "9876543.21",
            "true",
            "1979-05-27",
            "[\"secret-in-a-list\"]",
            "{ secret = \"in-a-table\" }",
        ] {
            let (_dir, path) = file(&format!("admin-token = {value}\n"));
            let err = resolve(&["--config", path.to_str().expect("UTF-8")])
                .expect_err("not a string")
                .to_string();
            assert!(
                err.contains("admin-token: expected a string in quotes"),
                "{err}"
            );
            assert!(!err.contains(value), "{err}");
        }
    }

    #[test]
    fn the_admin_token_comes_from_the_file_or_the_flag_and_is_never_shown() {
        let (_dir, path) = file("admin-token = \"from-the-file-secret\"\n");
        let p = path.to_str().expect("UTF-8");
        let from_file = resolve(&["--config", p]).expect("resolves");
        assert_eq!(
            from_file.admin_token,
            Some(Token::new("from-the-file-secret"))
        );
        let flag = resolve(&["-c", p, "--admin-token", "from-the-flag-secret"]).expect("ok");
        assert_eq!(flag.admin_token, Some(Token::new("from-the-flag-secret")));
        assert!(!format!("{flag:?}").contains("from-the-flag-secret"));
        assert_eq!(ServeOptions::default().admin_token, None);
        for (token, message) in [
            ("", "--admin-token must not be empty"),
            (
                "change-me-to-a-long-random-secret",
                "--admin-token is the documentation's placeholder",
            ),
            (
                "two words",
                "--admin-token takes visible ASCII characters only",
            ),
        ] {
            let refused = resolve(&["--admin-token", token])
                .expect_err("refused")
                .to_string();
            assert!(refused.starts_with(message), "{token:?}: {refused}");
            assert!(token.is_empty() || !refused.contains(token), "{refused}");
        }
    }

    #[test]
    fn values_out_of_range_are_refused_naming_the_option() {
        for (args, message) in [
            (
                &["--debounce", "0s"][..],
                "--debounce must be at least 10ms, not 0s",
            ),
            (
                &["--watch", "poll", "--poll-interval", "1ms"][..],
                "--poll-interval must be at least 10ms, not 1ms",
            ),
            (
                &["--debounce", "1h"][..],
                "--debounce must be at most 2s, not 1h",
            ),
            (
                &["--idle-timeout", "5ms"][..],
                "--idle-timeout must be at least 10ms, not 5ms",
            ),
            (
                &["--max-connections", "0"][..],
                "--max-connections must be at least 1",
            ),
            (
                &["--max-header-bytes", "100"][..],
                "--max-header-bytes must be at least 8192 (8 KiB), not 100",
            ),
            (
                &["--journal", "100001"][..],
                "--journal keeps at most 100000 requests, not 100001",
            ),
            (
                &["--refresh-every", "50ms"][..],
                "--refresh-every must be at least 100ms, not 50ms",
            ),
            #[cfg(feature = "pull")]
            (
                &["--refresh-every", "1m", "--offline-after", "0"][..],
                "--offline-after must be at least 1",
            ),
            #[cfg(not(feature = "pull"))]
            (
                &["--refresh-every", "1m"][..],
                "--refresh-every needs eventbox built with the `pull` feature",
            ),
        ] {
            let refused = resolve(args).expect_err("refused").to_string();
            assert_eq!(refused, message, "{args:?}");
        }
        assert!(resolve(&["--journal", "100000"]).is_ok());
        assert!(resolve(&["--max-header-bytes", "8192"]).is_ok());
    }

    #[test]
    #[cfg(feature = "pull")]
    fn refreshing_is_off_by_default_and_taken_from_a_flag_or_the_file() {
        let d = ServeOptions::default();
        assert_eq!((d.refresh_every, d.offline_after), (None, 2));
        let flag = resolve(&["--refresh-every", "30s", "--offline-after", "3"]).expect("valid");
        assert_eq!(
            (flag.refresh_every, flag.offline_after),
            (Some(Duration::from_secs(30)), 3)
        );
        let (_dir, path) = file("refresh-every = \"1m30s\"\noffline-after = 4\n");
        let path = path.to_str().expect("UTF-8");
        let from_file = resolve(&["--config", path]).expect("valid");
        assert_eq!(
            (from_file.refresh_every, from_file.offline_after),
            (Some(Duration::from_secs(90)), 4)
        );
        let over = resolve(&["--config", path, "--refresh-every", "5s"]).expect("valid");
        assert_eq!(over.refresh_every, Some(Duration::from_secs(5)));
        let (_dir, bare) = file("refresh-every = 30\n");
        let err = resolve(&["--config", bare.to_str().expect("UTF-8")])
            .expect_err("a bare number")
            .to_string();
        assert!(err.contains("refresh-every: 30: add a unit"), "{err}");
    }

    #[test]
    fn a_bundle_toml_key_is_said_to_belong_there() {
        let known = file_keys();
        assert_eq!(
            unknown_key("source", &known),
            "unknown key \"source\": `source` belongs in a bundle's bundle.toml (docs/bundles.md), not in the server's configuration file"
        );
    }

    #[test]
    fn a_misspelt_key_names_the_file_line_and_closest_key() {
        let (_dir, path) = file("data = \"x\"\n\nidle-timout = \"60s\"\n");
        let err = resolve(&["--config", path.to_str().expect("UTF-8")]).expect_err("refused");
        assert_eq!(
            err.to_string(),
            format!(
                "{}:3:1: unknown key \"idle-timout\"; did you mean \"idle-timeout\"?",
                path.display()
            )
        );
        let (_dir, old) = file("idle_timeout_ms = 60000\n");
        let err = resolve(&["-c", old.to_str().expect("UTF-8")]).expect_err("refused");
        assert!(
            err.to_string().ends_with(
                ":1:1: unknown key \"idle_timeout_ms\"; did you mean \"idle-timeout\"? \
                    (a duration with its unit now, e.g. \"60s\" or \"500ms\")"
            ),
            "{err}"
        );
        let (_dir, far) = file("colour = \"blue\"\n");
        let err = resolve(&["-c", far.to_str().expect("UTF-8")]).expect_err("refused");
        assert!(
            err.to_string().contains("the keys are the long flags"),
            "{err}"
        );
    }

    #[test]
    fn a_bad_value_names_the_key_and_line() {
        for (text, expected) in [
            (
                "data = \"d\"\nidle-timeout = 60\n",
                ":2:16: idle-timeout: 60: add a unit, e.g. \"60s\" or \"60ms\"",
            ),
            (
                "\nwatch = \"sometimes\"\n",
                ":2:9: watch: unknown variant `sometimes`, expected one of `native`, `poll`, `off`",
            ),
            (
                "journal = \"many\"\n",
                ":1:11: journal: invalid type: string \"many\", expected a whole number from 0",
            ),
            (
                "port = 70000\n",
                ":1:8: port: invalid value: integer `70000`, expected a whole number from 0 to 65535",
            ),
            (
                "addr = \"here\"\n",
                ":1:8: addr: \"here\" is not an address",
            ),
            ("addr = \n", ":1:8: "),
            // Checked once every value is known, and still named at its place in the file.
            (
                "\ndebounce = \"1ms\"\n",
                ":2:12: debounce: must be at least 10ms, not 1ms",
            ),
            (
                "journal = 200000\n",
                ":1:11: journal: keeps at most 100000 requests, not 200000",
            ),
            (
                "cors-origin = [\"app.example\"]\n",
                ":1:15: cors-origin: \"app.example\" is not an origin: add its scheme",
            ),
        ] {
            let (_dir, path) = file(text);
            let err = resolve(&["-c", path.to_str().expect("UTF-8")])
                .expect_err("refused")
                .to_string();
            let rest = err
                .strip_prefix(&path.display().to_string())
                .unwrap_or_else(|| panic!("not naming the file: {err}"));
            assert!(rest.starts_with(expected), "{text:?}: {err}");
        }
    }

    #[test]
    fn the_documented_configuration_file_is_valid() {
        let doc = include_str!("../docs/operations.md");
        let example = doc
            .split("```toml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .expect("docs/operations.md has a toml block");
        let parsed = parse_file(Path::new("operations.md"), example).expect("valid");
        let documented: Vec<&str> = parsed.keys.iter().map(String::as_str).collect();
        let mut missing = file_keys();
        missing.retain(|k| !documented.contains(&k.as_str()));
        assert!(missing.is_empty(), "keys not in the example: {missing:?}");
        assert_eq!(parsed.options.idle_timeout, Duration::from_secs(60));
        assert_eq!(
            parsed.options.watch_mode(),
            WatchMode::Poll(Duration::from_millis(500))
        );
    }

    #[test]
    fn the_port_comes_from_port_then_addr_then_the_variable() {
        let port = |args: &[&str], var: Option<&str>| {
            let (options, _) = parse(args);
            options
                .with_port_variable(var)
                .map(|o| o.listen_addr().to_string())
        };
        assert_eq!(port(&[], None).expect("ok"), "127.0.0.1:8080");
        assert_eq!(port(&[], Some("9000")).expect("ok"), "127.0.0.1:9000");
        assert_eq!(port(&["-p", "0"], Some("9000")).expect("ok"), "127.0.0.1:0");
        assert_eq!(
            port(&["-a", "0.0.0.0"], Some("9000")).expect("ok"),
            "0.0.0.0:9000"
        );
        assert_eq!(
            port(&["-a", "[::1]:81"], Some("9000")).expect("ok"),
            "[::1]:81"
        );
        assert_eq!(
            port(&["-a", "10.0.0.1:81", "-p", "82"], None).expect("ok"),
            "10.0.0.1:82"
        );
        let bad = port(&[], Some("http")).expect_err("refused").to_string();
        assert_eq!(bad, "PORT=\"http\" is not a port number (0 to 65535)");
        assert_eq!(port(&[], Some("")).expect("unset"), "127.0.0.1:8080");
        assert_eq!(
            port(&["-a", "localhost:81"], Some("9000")).expect("ok"),
            "127.0.0.1:81"
        );
        assert_eq!(
            port(&["-a", "LocalHost"], Some("9000")).expect("ok"),
            "127.0.0.1:9000"
        );
        for bad in [
            "localhost:http",
            "localhost:+80",
            "localhostx",
            "example.com:80",
        ] {
            assert!(bad.parse::<ListenAddr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_log_level_wins_over_rust_log_and_v_q_move_it() {
        let filter = |args: &[&str], rust_log: Option<&str>| parse(args).0.log_filter(rust_log);
        assert_eq!(filter(&[], None), "info,notify=error,object_store=warn");
        assert_eq!(filter(&["-q"], None), "warn,notify=error");
        assert_eq!(filter(&[], Some("eventbox=debug")), "eventbox=debug");
        assert_eq!(
            filter(&["-v"], Some("eventbox=debug")),
            "debug,notify=error"
        );
        assert_eq!(filter(&["-vv"], None), "trace");
        assert_eq!(filter(&["-qqqq"], None), "off");
        assert_eq!(
            filter(&["--log-level", "warn", "-q"], Some("trace")),
            "error"
        );
    }
}
