//! The validated configuration of `serve`: command-line flags and `EVENTBOX_*` variables over an
//! optional TOML file (`--config eventbox.toml`) over the defaults. Raw flags are clap's job in
//! `cli`; this module merges and checks them. Unknown keys in the file are reported, not fatal.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::http::Limits;
use crate::watch::WatchMode;

pub const DEFAULT_DATA: &str = "data";
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(250);
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(100);

/// How logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// How to watch, as written in flags and the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WatchKind {
    /// The platform's file events (inotify...).
    Native,
    /// Scan the folder every --poll-interval (network shares, some container volumes).
    Poll,
    /// Do not watch (SIGHUP still reloads).
    Off,
}

/// What flags and environment variables gave (`None`: not given).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub data: Option<PathBuf>,
    pub addr: Option<SocketAddr>,
    pub watch: Option<WatchKind>,
    pub no_watch: Option<bool>,
    pub poll_interval: Option<Duration>,
    pub debounce: Option<Duration>,
    pub log_format: Option<LogFormat>,
    pub access_log: Option<bool>,
    pub compression: Option<Switch>,
    /// Empty: not given.
    pub cors_origins: Vec<String>,
    pub header_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub max_header_bytes: Option<usize>,
    pub max_connections: Option<usize>,
    pub max_connections_per_ip: Option<usize>,
    pub body_timeout: Option<Duration>,
    pub max_file_bytes: Option<u64>,
    pub allow_control_headers: Option<bool>,
    pub max_delay: Option<Duration>,
    pub journal: Option<usize>,
}

/// On or off, as written in flags and the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Switch {
    On,
    Off,
}

/// The shortest debounce and poll interval accepted: below it the watcher would spin.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The most requests `--journal` may keep.
pub const MAX_JOURNAL: usize = crate::http::journal::MAX_CAPACITY;

/// The configuration file's keys; every serve option has one.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct FileConfig {
    data: Option<PathBuf>,
    addr: Option<String>,
    watch: Option<WatchKind>,
    poll_interval_ms: Option<u64>,
    debounce_ms: Option<u64>,
    log_format: Option<LogFormat>,
    access_log: Option<bool>,
    compression: Option<Switch>,
    cors_origins: Option<Vec<String>>,
    header_timeout_ms: Option<u64>,
    idle_timeout_ms: Option<u64>,
    max_header_bytes: Option<usize>,
    max_connections: Option<usize>,
    max_connections_per_ip: Option<usize>,
    body_timeout_ms: Option<u64>,
    max_file_bytes: Option<u64>,
    allow_control_headers: Option<bool>,
    max_delay_ms: Option<u64>,
    journal: Option<usize>,
}

const FILE_KEYS: [&str; 19] = [
    "data",
    "addr",
    "watch",
    "poll_interval_ms",
    "debounce_ms",
    "log_format",
    "access_log",
    "compression",
    "cors_origins",
    "header_timeout_ms",
    "idle_timeout_ms",
    "max_header_bytes",
    "max_connections",
    "max_connections_per_ip",
    "body_timeout_ms",
    "max_file_bytes",
    "allow_control_headers",
    "max_delay_ms",
    "journal",
];

/// A configuration that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("{0}")]
    Value(String),
}

/// The configuration `serve` runs with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    pub data: PathBuf,
    pub addr: SocketAddr,
    pub watch: WatchMode,
    pub debounce: Duration,
    pub log_format: LogFormat,
    pub access_log: bool,
    /// Send gzip and brotli bodies to clients that accept them.
    pub compression: bool,
    /// Origins allowed by CORS (`*`: all; `none`: CORS off).
    pub cors_origins: Vec<String>,
    pub limits: Limits,
    /// Obey the `X-Eventbox-*` control headers.
    pub allow_control_headers: bool,
    /// The longest simulated delay.
    pub max_delay: Duration,
    /// How many requests the journal keeps (0: off).
    pub journal: usize,
    /// The largest bundle file read; a larger one is an error of its bundle.
    pub max_file_bytes: u64,
}

impl ServeConfig {
    /// Merges flags over the file (if any) over the defaults. Also returns the warnings to log
    /// once logging is set up (unknown keys in the file).
    pub fn resolve(
        overrides: &Overrides,
        file: Option<&Path>,
    ) -> Result<(ServeConfig, Vec<String>), ConfigError> {
        let (file_config, warnings) = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                parse_file(&text).map_err(|message| ConfigError::Invalid {
                    path: path.to_path_buf(),
                    message,
                })?
            }
            None => (FileConfig::default(), Vec::new()),
        };
        let invalid = |message: String| ConfigError::Invalid {
            path: file.map(Path::to_path_buf).unwrap_or_default(),
            message,
        };
        let file_addr = match &file_config.addr {
            Some(a) => Some(
                a.parse::<SocketAddr>()
                    .map_err(|e| invalid(format!("addr: {a:?}: {e}")))?,
            ),
            None => None,
        };
        let default_addr: SocketAddr = DEFAULT_ADDR
            .parse()
            .map_err(|_| invalid("bad default address".into()))?;
        let kind = if overrides.no_watch == Some(true) {
            WatchKind::Off
        } else {
            overrides
                .watch
                .or(file_config.watch)
                .unwrap_or(WatchKind::Native)
        };
        let poll_interval = overrides
            .poll_interval
            .or(file_config.poll_interval_ms.map(Duration::from_millis))
            .unwrap_or(DEFAULT_POLL_INTERVAL);
        let watch = match kind {
            WatchKind::Native => WatchMode::Native,
            WatchKind::Poll => WatchMode::Poll(poll_interval),
            WatchKind::Off => WatchMode::Off,
        };
        let defaults = Limits::default();
        let config = ServeConfig {
            data: overrides
                .data
                .clone()
                .or(file_config.data)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA)),
            addr: overrides.addr.or(file_addr).unwrap_or(default_addr),
            watch,
            debounce: overrides
                .debounce
                .or(file_config.debounce_ms.map(Duration::from_millis))
                .unwrap_or(DEFAULT_DEBOUNCE),
            log_format: overrides
                .log_format
                .or(file_config.log_format)
                .unwrap_or(LogFormat::Text),
            access_log: overrides
                .access_log
                .or(file_config.access_log)
                .unwrap_or(false),
            compression: overrides.compression.or(file_config.compression) != Some(Switch::Off),
            cors_origins: if overrides.cors_origins.is_empty() {
                file_config
                    .cors_origins
                    .unwrap_or_else(|| vec!["*".to_string()])
            } else {
                overrides.cors_origins.clone()
            },
            limits: Limits {
                header_timeout: overrides
                    .header_timeout
                    .or(file_config.header_timeout_ms.map(Duration::from_millis))
                    .unwrap_or(defaults.header_timeout),
                idle_timeout: overrides
                    .idle_timeout
                    .or(file_config.idle_timeout_ms.map(Duration::from_millis))
                    .unwrap_or(defaults.idle_timeout),
                max_header_bytes: overrides
                    .max_header_bytes
                    .or(file_config.max_header_bytes)
                    .unwrap_or(defaults.max_header_bytes),
                max_connections: overrides
                    .max_connections
                    .or(file_config.max_connections)
                    .unwrap_or(defaults.max_connections),
                max_connections_per_ip: overrides
                    .max_connections_per_ip
                    .or(file_config.max_connections_per_ip)
                    .unwrap_or(defaults.max_connections_per_ip),
                body_timeout: overrides
                    .body_timeout
                    .or(file_config.body_timeout_ms.map(Duration::from_millis))
                    .unwrap_or(defaults.body_timeout),
            },
            allow_control_headers: overrides
                .allow_control_headers
                .or(file_config.allow_control_headers)
                .unwrap_or(false),
            max_delay: overrides
                .max_delay
                .or(file_config.max_delay_ms.map(Duration::from_millis))
                .unwrap_or(crate::http::Service::DEFAULT_MAX_DELAY),
            journal: overrides.journal.or(file_config.journal).unwrap_or(0),
            max_file_bytes: overrides
                .max_file_bytes
                .or(file_config.max_file_bytes)
                .unwrap_or(crate::read::DEFAULT_MAX_FILE_BYTES),
        };
        if let WatchMode::Poll(interval) = config.watch {
            if interval < MIN_INTERVAL {
                return Err(ConfigError::Value(format!(
                    "the poll interval must be at least {MIN_INTERVAL:?}, not {interval:?}"
                )));
            }
        }
        let l = &config.limits;
        if l.header_timeout < MIN_INTERVAL
            || l.idle_timeout < MIN_INTERVAL
            || l.body_timeout < MIN_INTERVAL
            || l.max_connections == 0
            || l.max_connections_per_ip == 0
        {
            return Err(ConfigError::Value(
                "timeouts must be at least 10ms and max_connections and max_connections_per_ip \
                 at least 1"
                    .to_string(),
            ));
        }
        if config.max_file_bytes == 0 {
            return Err(ConfigError::Value(
                "max_file_bytes must be at least 1".to_string(),
            ));
        }
        if config.journal > MAX_JOURNAL {
            return Err(ConfigError::Value(format!(
                "the journal keeps at most {MAX_JOURNAL} requests, not {}",
                config.journal
            )));
        }
        if config.debounce < MIN_INTERVAL {
            return Err(ConfigError::Value(format!(
                "the debounce must be at least {MIN_INTERVAL:?}, not {:?}",
                config.debounce
            )));
        }
        Ok((config, warnings))
    }
}

/// Parses the file; unknown keys become warnings.
fn parse_file(text: &str) -> Result<(FileConfig, Vec<String>), String> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().trim_end().to_string())?;
    let warnings = table
        .keys()
        .filter(|k| !FILE_KEYS.contains(&k.as_str()))
        .map(|k| {
            format!(
                "unknown key {k:?} ignored (known: {})",
                FILE_KEYS.join(", ")
            )
        })
        .collect();
    let config = FileConfig::deserialize(toml::Value::Table(table))
        .map_err(|e| e.message().trim_end().to_string())?;
    Ok((config, warnings))
}

/// Parses a duration written as `250ms`, `2s` or a plain number of milliseconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale) = if let Some(ms) = t.strip_suffix("ms") {
        (ms, 1)
    } else if let Some(s) = t.strip_suffix('s') {
        (s, 1000)
    } else {
        (t, 1)
    };
    number
        .trim()
        .parse::<u64>()
        .map(|n| Duration::from_millis(n.saturating_mul(scale)))
        .map_err(|_| format!("{text:?} is not a duration (write 500ms or 2s)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_file_which_overrides_defaults() {
        let file = "data = \"from-file\"\naddr = \"127.0.0.1:9000\"\nwatch = \"poll\"\npoll_interval_ms = 250\ncolour = \"blue\"\n";
        let (parsed, warnings) = parse_file(file).expect("valid");
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("unknown key \"colour\""),
            "{warnings:?}"
        );
        assert_eq!(parsed.poll_interval_ms, Some(250));

        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("eventbox.toml");
        std::fs::write(&path, file).expect("write");
        let overrides = Overrides {
            addr: Some("127.0.0.1:7000".parse().expect("addr")),
            ..Overrides::default()
        };
        let (config, _) = ServeConfig::resolve(&overrides, Some(&path)).expect("resolves");
        assert_eq!(config.data, PathBuf::from("from-file"));
        assert_eq!(config.addr, "127.0.0.1:7000".parse().expect("addr"));
        assert_eq!(config.watch, WatchMode::Poll(Duration::from_millis(250)));
        assert_eq!(config.debounce, DEFAULT_DEBOUNCE);

        let (defaults, _) = ServeConfig::resolve(&Overrides::default(), None).expect("resolves");
        assert_eq!(defaults.data, PathBuf::from("data"));
        assert_eq!(defaults.watch, WatchMode::Native);
        let off = Overrides {
            no_watch: Some(true),
            ..Overrides::default()
        };
        assert_eq!(
            ServeConfig::resolve(&off, Some(&path))
                .expect("resolves")
                .0
                .watch,
            WatchMode::Off
        );
    }

    #[test]
    fn flags_turn_a_files_switches_off_and_tiny_intervals_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("eventbox.toml");
        std::fs::write(&path, "access_log = true\nwatch = \"off\"\n").expect("write");
        let (from_file, _) = ServeConfig::resolve(&Overrides::default(), Some(&path)).expect("ok");
        assert!(from_file.access_log);
        let flags = Overrides {
            access_log: Some(false),
            watch: Some(WatchKind::Native),
            ..Overrides::default()
        };
        let (overridden, _) = ServeConfig::resolve(&flags, Some(&path)).expect("ok");
        assert!(!overridden.access_log);
        assert_eq!(overridden.watch, WatchMode::Native);
        for bad in [
            Overrides {
                debounce: Some(Duration::ZERO),
                ..Overrides::default()
            },
            Overrides {
                watch: Some(WatchKind::Poll),
                poll_interval: Some(Duration::from_millis(1)),
                ..Overrides::default()
            },
        ] {
            assert!(ServeConfig::resolve(&bad, None).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn simulation_options_come_from_the_file_and_flags() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("eventbox.toml");
        std::fs::write(
            &path,
            "allow_control_headers = true\nmax_delay_ms = 2000\njournal = 50\n",
        )
        .expect("write");
        let (defaults, _) = ServeConfig::resolve(&Overrides::default(), None).expect("ok");
        assert!(!defaults.allow_control_headers);
        assert_eq!(defaults.max_delay, Duration::from_secs(30));
        assert_eq!(defaults.journal, 0);
        let (from_file, warnings) =
            ServeConfig::resolve(&Overrides::default(), Some(&path)).expect("ok");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert!(from_file.allow_control_headers);
        assert_eq!(from_file.max_delay, Duration::from_secs(2));
        assert_eq!(from_file.journal, 50);
        let flags = Overrides {
            allow_control_headers: Some(false),
            max_delay: Some(Duration::from_millis(500)),
            journal: Some(0),
            ..Overrides::default()
        };
        let (overridden, _) = ServeConfig::resolve(&flags, Some(&path)).expect("ok");
        assert!(!overridden.allow_control_headers);
        assert_eq!(overridden.max_delay, Duration::from_millis(500));
        assert_eq!(overridden.journal, 0);
        let most = Overrides {
            journal: Some(MAX_JOURNAL),
            ..Overrides::default()
        };
        assert!(ServeConfig::resolve(&most, None).is_ok());
        std::fs::write(&path, "journal = 100001\n").expect("write");
        let refused = ServeConfig::resolve(&Overrides::default(), Some(&path))
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            refused.as_deref(),
            Some("the journal keeps at most 100000 requests, not 100001")
        );
    }

    #[test]
    fn hardening_limits_come_from_the_file_and_flags_and_zero_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("eventbox.toml");
        std::fs::write(
            &path,
            "max_file_bytes = 5000\nmax_connections_per_ip = 3\nbody_timeout_ms = 500\n",
        )
        .expect("write");
        let (defaults, _) = ServeConfig::resolve(&Overrides::default(), None).expect("ok");
        assert_eq!(defaults.max_file_bytes, 1 << 30);
        assert_eq!(defaults.limits.max_connections_per_ip, 64);
        assert_eq!(defaults.limits.body_timeout, Duration::from_secs(10));
        let (from_file, warnings) =
            ServeConfig::resolve(&Overrides::default(), Some(&path)).expect("ok");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(from_file.max_file_bytes, 5000);
        assert_eq!(from_file.limits.max_connections_per_ip, 3);
        assert_eq!(from_file.limits.body_timeout, Duration::from_millis(500));
        let flags = Overrides {
            max_file_bytes: Some(7),
            ..Overrides::default()
        };
        let (overridden, _) = ServeConfig::resolve(&flags, Some(&path)).expect("ok");
        assert_eq!(overridden.max_file_bytes, 7);
        for bad in [
            Overrides {
                max_file_bytes: Some(0),
                ..Overrides::default()
            },
            Overrides {
                max_connections_per_ip: Some(0),
                ..Overrides::default()
            },
        ] {
            assert!(ServeConfig::resolve(&bad, None).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn bad_files_name_the_problem() {
        assert!(parse_file("watch = \"sometimes\"\n").is_err());
        assert!(parse_file("addr = 80\n").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("40"), Ok(Duration::from_millis(40)));
        assert!(parse_duration("soon").is_err());
    }
}
