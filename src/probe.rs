//! `eventbox probe URL`: one plain-HTTP GET, exit 0 on a 2xx answer and 1 otherwise, with one
//! line saying why. It is the container image's health check (a `FROM scratch` image has no
//! curl), so it is a few lines over tokio's `TcpStream` rather than an HTTP client: it needs
//! only the status line, and it must never hang (one timeout covers connect, write and read).
//!
//! Every failure exits 1, never 2: Docker reserves a health check's exit code 2.

use std::time::Duration;

use clap::Args;
use hyper::Uri;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `eventbox probe`'s options.
#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// The URL to GET, plain HTTP, e.g. http://127.0.0.1:8080/readyz [default: /readyz of the
    /// server `eventbox serve` would start here: the address its EVENTBOX_* variables, its
    /// configuration file and PORT give, on loopback when that is every interface]
    pub(crate) url: Option<String>,
    /// Time allowed for the whole request, e.g. 500ms or 2s
    #[arg(long, default_value = "2s", value_parser = crate::config::parse_duration)]
    pub(crate) timeout: Duration,
}

/// Why a probe failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProbeError {
    #[error("{url}: not a URL: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("{url}: only http:// URLs can be probed")]
    NotHttp { url: String },
    #[error("{url}: cannot connect: {source}")]
    Connect { url: String, source: std::io::Error },
    #[error("{url}: {source}")]
    Io { url: String, source: std::io::Error },
    #[error("{url}: no answer within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("{url}: not an HTTP answer: {line:?}")]
    BadAnswer { url: String, line: String },
}

/// The status line of a successful exchange: its code and the whole line.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) line: String,
}

/// `/readyz` of a server listening on `addr`: on 127.0.0.1 when it listens on every interface
/// (`[::]` takes IPv4 too, eventbox never setting v6-only, and a container may have no `::1`),
/// so the image's health check follows a port set with `EVENTBOX_ADDR`.
fn readyz_of(addr: std::net::SocketAddr) -> String {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    let ip = match addr.ip() {
        ip if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}/readyz", SocketAddr::new(ip, addr.port()))
}

/// The longest status line read; a real one is under 100 bytes.
const MAX_STATUS_LINE: usize = 1024;

/// GETs `url` and returns its status line.
pub(crate) async fn get(url: &str, timeout: Duration) -> Result<Answer, ProbeError> {
    let uri: Uri = url
        .parse()
        .map_err(|e: hyper::http::uri::InvalidUri| ProbeError::BadUrl {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
    if uri.scheme_str() != Some("http") {
        return Err(ProbeError::NotHttp {
            url: url.to_string(),
        });
    }
    let Some(authority) = uri.authority() else {
        return Err(ProbeError::BadUrl {
            url: url.to_string(),
            reason: "no host".to_string(),
        });
    };
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = authority.port_u16().unwrap_or(80);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: eventbox-probe\r\n\
         Connection: close\r\n\r\n"
    );
    let exchange = async {
        let mut stream =
            TcpStream::connect((host, port))
                .await
                .map_err(|source| ProbeError::Connect {
                    url: url.to_string(),
                    source,
                })?;
        let io = |source| ProbeError::Io {
            url: url.to_string(),
            source,
        };
        stream.write_all(request.as_bytes()).await.map_err(io)?;
        let mut head = Vec::with_capacity(128);
        let mut buf = [0u8; 256];
        while !head.contains(&b'\n') && head.len() < MAX_STATUS_LINE {
            let n = stream.read(&mut buf).await.map_err(io)?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
        let line = String::from_utf8_lossy(&head[..end]).trim_end().to_string();
        let status = parse_status_line(&line).ok_or_else(|| ProbeError::BadAnswer {
            url: url.to_string(),
            line: line.clone(),
        })?;
        Ok(Answer { status, line })
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(ProbeError::Timeout {
            url: url.to_string(),
            timeout,
        }),
    }
}

/// The code of `HTTP/1.x NNN reason`.
fn parse_status_line(line: &str) -> Option<u16> {
    let mut parts = line.splitn(3, ' ');
    let version = parts.next()?;
    let code = parts.next()?;
    if !version.starts_with("HTTP/") || code.len() != 3 {
        return None;
    }
    code.parse().ok()
}

/// `eventbox probe`: 0 on a 2xx answer, 1 otherwise (including when the runtime cannot start).
/// The answer's status line goes to stdout; a failure's reason to stderr.
pub fn run(args: &ProbeArgs) -> u8 {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("eventbox probe: cannot start the runtime: {e}");
            return 1;
        }
    };
    let url = match &args.url {
        Some(url) => url.clone(),
        None => match crate::cli::served_address() {
            Ok(addr) => readyz_of(addr),
            Err(e) => {
                eprintln!("eventbox probe: no URL given, and serve's address cannot be told: {e}");
                return 1;
            }
        },
    };
    match runtime.block_on(get(&url, args.timeout)) {
        Ok(answer) if (200..300).contains(&answer.status) => {
            println!("{url}: {}", answer.line);
            0
        }
        Ok(answer) => {
            eprintln!("eventbox probe: {url}: {}", answer.line);
            1
        }
        Err(e) => {
            eprintln!("eventbox probe: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_are_read_and_others_refused() {
        assert_eq!(parse_status_line("HTTP/1.1 200 OK"), Some(200));
        assert_eq!(
            parse_status_line("HTTP/1.0 503 Service Unavailable"),
            Some(503)
        );
        assert_eq!(parse_status_line("HTTP/1.1 204"), Some(204));
        assert_eq!(parse_status_line("SSH-2.0-OpenSSH_9.2"), None);
        assert_eq!(parse_status_line("HTTP/1.1 2000 OK"), None);
        assert_eq!(parse_status_line(""), None);
    }

    #[tokio::test]
    async fn urls_that_cannot_be_probed_are_refused_before_connecting() {
        let t = Duration::from_secs(1);
        let e = get("https://127.0.0.1:1/readyz", t).await.err();
        assert!(matches!(e, Some(ProbeError::NotHttp { .. })), "{e:?}");
        let e = get("not a url", t).await.err();
        assert!(matches!(e, Some(ProbeError::BadUrl { .. })), "{e:?}");
        let e = get("/readyz", t).await.err();
        assert!(matches!(e, Some(ProbeError::NotHttp { .. })), "{e:?}");
    }
}
