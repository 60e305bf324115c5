//! Prometheus metrics: requests by endpoint and status, request durations, bundles served, reloads
//! by result, the time of the last reload, load errors per bundle, and what the memory file of
//! large bodies holds and has sent (process-wide, read when scraped).
//!
//! Uses the Prometheus project's own Rust client for the text format. Recording a request is a
//! few atomic operations; `/metrics` encodes the registry when scraped (an operations endpoint,
//! so the no-serialisation rule of the API paths does not apply to it).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BundleLabels {
    bundle: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueLabels {
    bundle: String,
    state: &'static str,
}

type HistogramFamily = Family<EndpointLabels, Histogram, fn() -> Histogram>;

fn duration_histogram() -> Histogram {
    // 25 µs to about 0.8 s.
    Histogram::new(exponential_buckets(0.000_025, 2.0, 16))
}

/// The metrics of one server.
#[derive(Debug)]
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    durations: HistogramFamily,
    bundles_served: Gauge,
    reloads: Family<ResultLabels, Counter>,
    last_reload: Gauge<f64, AtomicU64>,
    load_errors: Family<BundleLabels, Gauge>,
    upstream_up: Family<BundleLabels, Gauge>,
    snapshot_age: Family<BundleLabels, Gauge<f64, AtomicU64>>,
    writes_queued: Family<QueueLabels, Gauge>,
    state_log_failing: Gauge,
    /// The sources whose snapshot ages are computed when scraped.
    sources: Arc<crate::kiosk::Sources>,
    /// The writes whose queue and state log are read when scraped.
    writes: Arc<crate::writes::Writes>,
    /// Held while a scrape sets the values read then and encodes them: two scrapes at once
    /// would otherwise clear each other's series.
    scraping: std::sync::Mutex<()>,
}

/// The memory file of large bodies ([`crate::memfile`]), read when scraped: one per process.
#[derive(Debug)]
struct MemoryFile;

impl Collector for MemoryFile {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let usage = crate::memfile::usage();
        let in_use = ConstGauge::new(i64::from(usage.in_use));
        let held = ConstGauge::new(i64::try_from(usage.held).unwrap_or(i64::MAX));
        let sent = ConstCounter::new(usage.sent);
        let metrics: [(&str, &str, &dyn EncodeMetric); 3] = [
            ("memory_file_in_use", "1 while large bodies are kept in a memory file and sent from it with sendfile; 0 when they are copied into sockets (an info log line says why)", &in_use),
            ("memory_file_bytes", "Bytes of the memory file's pages that hold bodies being served (whole pages)", &held),
            ("memory_file_sent_bytes", "Bytes sent to clients from the memory file (sendfile), since the process started", &sent),
        ];
        for (name, help, metric) in metrics {
            metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)?;
        }
        Ok(())
    }
}

/// The content type of the text format this module writes.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Registers `metric` as `name` and gives it back: a handle on the values the registry encodes.
fn registered<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

impl Metrics {
    /// The metrics of a server whose sources' snapshot ages and writes' queue and state log
    /// are read when scraped.
    pub(crate) fn new(
        sources: Arc<crate::kiosk::Sources>,
        writes: Arc<crate::writes::Writes>,
    ) -> Metrics {
        let mut registry = Registry::with_prefix("eventbox");
        let r = &mut registry;
        Metrics {
            requests: registered(
                r,
                "http_requests",
                "HTTP requests answered, by endpoint and status",
                Family::default(),
            ),
            durations: registered(
                r,
                "http_request_duration_seconds",
                "Time to answer a request, by endpoint",
                Family::new_with_constructor(duration_histogram),
            ),
            bundles_served: registered(r, "bundles_served", "Bundles being served", Gauge::default()),
            reloads: registered(
                r,
                "bundle_loads",
                "Bundle folders read (at start and on reload), by result: ok, or error (the last good version, if any, keeps serving)",
                Family::default(),
            ),
            last_reload: registered(
                r,
                "last_reload_timestamp_seconds",
                "When the served snapshot was last replaced, in seconds since the Unix epoch",
                Gauge::default(),
            ),
            load_errors: registered(
                r,
                "bundle_load_errors",
                "Errors in the latest load of each bundle folder",
                Family::default(),
            ),
            upstream_up: registered(
                r,
                "upstream_up",
                "1 while a followed bundle's source answers its refreshes (serve --refresh-every), 0 while it is offline",
                Family::default(),
            ),
            snapshot_age: registered(
                r,
                "snapshot_age_seconds",
                "Seconds since the source of each bundle naming one last confirmed the snapshot served (the Age header)",
                Family::default(),
            ),
            writes_queued: registered(
                r,
                "writes_queued",
                "Writes made here (kiosk mode, --state) by bundle and state: pending (not yet taken by the source), parked (naming someone the source does not list yet), rejected (refused by the source; GET /_queue)",
                Family::default(),
            ),
            state_log_failing: registered(
                r,
                "state_log_failing",
                "1 while the latest write could not be saved in the --state folder (writes are refused with 500 until one can be), 0 otherwise",
                Gauge::default(),
            ),
            sources,
            writes,
            scraping: std::sync::Mutex::new(()),
            registry: {
                registry.register_collector(Box::new(MemoryFile));
                registry
            },
        }
    }

    /// Counts one answered request.
    pub(crate) fn observe_request(&self, endpoint: &'static str, status: u16, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels { endpoint, status })
            .inc();
        self.durations
            .get_or_create(&EndpointLabels { endpoint })
            .observe(took.as_secs_f64());
    }

    /// Counts one bundle folder read.
    pub(crate) fn observe_load(&self, ok: bool) {
        let result = if ok { "ok" } else { "error" };
        self.reloads.get_or_create(&ResultLabels { result }).inc();
    }

    /// Records a published snapshot: how many bundles it serves, and when.
    pub(crate) fn observe_snapshot(
        &self,
        bundles_served: usize,
        at: chrono::DateTime<chrono::Utc>,
    ) {
        self.bundles_served
            .set(i64::try_from(bundles_served).unwrap_or(i64::MAX));
        self.last_reload.set(at.timestamp_millis() as f64 / 1000.0);
    }

    /// Sets the error count of each bundle folder, forgetting folders that are gone.
    pub(crate) fn set_load_errors<'a>(
        &self,
        counts: impl Iterator<Item = (&'a str, usize)>,
        removed: &[String],
    ) {
        for (bundle, n) in counts {
            let labels = BundleLabels {
                bundle: bundle.to_string(),
            };
            self.load_errors
                .get_or_create(&labels)
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        for bundle in removed {
            self.load_errors.remove(&BundleLabels {
                bundle: bundle.clone(),
            });
        }
    }

    /// Records whether a followed bundle's source is online.
    pub(crate) fn set_upstream(&self, bundle: &str, up: bool) {
        self.upstream_up
            .get_or_create(&BundleLabels {
                bundle: bundle.to_string(),
            })
            .set(i64::from(up));
    }

    /// A bundle is no longer followed.
    pub(crate) fn forget_upstream(&self, bundle: &str) {
        self.upstream_up.remove(&BundleLabels {
            bundle: bundle.to_string(),
        });
    }

    /// The text exposition of every metric.
    pub(crate) fn render(&self) -> String {
        let _scraping = self.scraping.lock().unwrap_or_else(|e| e.into_inner());
        let now = chrono::Utc::now();
        self.snapshot_age.clear();
        for (bundle, health) in self.sources.all() {
            if let Some(age) = health.age_seconds(now) {
                self.snapshot_age
                    .get_or_create(&BundleLabels { bundle })
                    .set(age as f64);
            }
        }
        self.writes_queued.clear();
        for (bundle, counts) in self.writes.queue.counts_by_bundle() {
            for (state, n) in ["pending", "parked", "rejected"].into_iter().zip(counts) {
                let labels = QueueLabels {
                    bundle: bundle.clone(),
                    state,
                };
                self.writes_queued
                    .get_or_create(&labels)
                    .set(i64::try_from(n).unwrap_or(i64::MAX));
            }
        }
        self.state_log_failing
            .set(i64::from(self.writes.state_failing()));
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_what_was_observed() {
        let m = Metrics::new(Arc::default(), Arc::new(crate::writes::Writes::new(false)));
        m.observe_request("event", 200, Duration::from_micros(40));
        m.observe_load(false);
        m.set_load_errors([("demo", 2)].into_iter(), &[]);
        let text = m.render();
        assert!(
            text.contains("eventbox_http_requests_total{endpoint=\"event\",status=\"200\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("eventbox_bundle_loads_total{result=\"error\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("eventbox_bundle_load_errors{bundle=\"demo\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("eventbox_http_request_duration_seconds_count{endpoint=\"event\"} 1"),
            "{text}"
        );
        for series in [
            "# TYPE eventbox_memory_file_in_use gauge",
            "# TYPE eventbox_memory_file_bytes gauge",
            "# TYPE eventbox_memory_file_sent_bytes counter",
            "eventbox_memory_file_sent_bytes_total ",
        ] {
            assert!(text.contains(series), "{series} in {text}");
        }
        m.set_load_errors(std::iter::empty(), &["demo".to_string()]);
        assert!(!m.render().contains("bundle=\"demo\""));
    }
}
