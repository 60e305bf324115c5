//! The simulation a bundle's `[simulate]` table asks for, as served: per request, a delay and
//! whether to answer with a simulated error, or with a fault (no answer, or a cut one).
//!
//! Draws are counter-based so they are lock-free and reproducible: each loaded version of a
//! bundle owns a request counter, and request `n` draws from `splitmix64` of the seed and `n`.
//! The same seed therefore gives the same sequence of delays, errors and faults for requests made one
//! after another; concurrent requests take the numbers in the order they arrive. A reload of the
//! bundle builds a new version, which starts its sequence again. Without a seed, the clock seeds
//! it. The router asks for a [`Draw`] and acts on it; the one piece of HTTP here is each
//! endpoint's `Retry-After`, made into a header value once per version, not per request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hyper::header::HeaderValue;

use crate::model::formats::RetryAfter;
use crate::model::simulate::{Fault, Settings, Simulate};
use crate::rng::{mix, GOLDEN};

/// What one request is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Draw {
    /// How long to wait before answering.
    pub(crate) delay: Duration,
    /// The status of a simulated error, or `None` for the real answer.
    pub(crate) error: Option<u16>,
    /// A fault instead of the answer (a request given one is given no error).
    pub(crate) fault: Option<Fault>,
}

/// The `Retry-After` header value of `r`.
pub(crate) fn header_value(r: RetryAfter) -> Option<HeaderValue> {
    HeaderValue::try_from(r.to_string()).ok()
}

/// One bundle version's simulation: its settings per endpoint and its request counter.
#[derive(Debug)]
pub(crate) struct Simulation {
    seed: u64,
    /// The seed bundle.toml names, if any (else `seed` came from the clock).
    configured: Option<u64>,
    endpoints: Vec<Settings>,
    /// Each endpoint's `Retry-After` for its simulated errors, as sent.
    retry_after: Vec<Option<HeaderValue>>,
    next: AtomicU64,
}

/// A seed from the clock, for a `[simulate]` that names none: 53 bits, so that `/status` shows
/// it exactly to any JSON reader (a double holds no more), for bundle.toml to replay it.
fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        & ((1 << 53) - 1)
}

impl Simulation {
    /// A fresh sequence for `config` (seeded from the clock when it names no seed).
    pub(crate) fn new(config: &Simulate) -> Simulation {
        Simulation {
            seed: config.seed.unwrap_or_else(clock_seed),
            configured: config.seed,
            endpoints: config.endpoints.clone(),
            retry_after: config
                .endpoints
                .iter()
                .map(|s| s.retry_after.and_then(header_value))
                .collect(),
            next: AtomicU64::new(0),
        }
    }

    /// The sequence started again, as [`Simulation::new`] with the same configuration would.
    pub(crate) fn renewed(&self) -> Simulation {
        Simulation {
            seed: self.configured.unwrap_or_else(clock_seed),
            configured: self.configured,
            endpoints: self.endpoints.clone(),
            retry_after: self.retry_after.clone(),
            next: AtomicU64::new(0),
        }
    }

    /// What `/status` shows of it: the seed of the sequence (`seed_from`: `bundle.toml`, or the
    /// `clock` when it names none; with it a run can be replayed) and the settings of each
    /// endpoint whose settings are not the defaults, by key.
    pub(crate) fn shown(&self) -> serde_json::Value {
        let endpoints: serde_json::Map<String, serde_json::Value> = crate::api::API
            .iter()
            .zip(&self.endpoints)
            .filter(|(_, s)| **s != Settings::default())
            .map(|(e, s)| {
                let shown = serde_json::json!({
                    "latency_ms": [s.latency_ms.0, s.latency_ms.1],
                    "error_rate": s.error_rate,
                    "error_status": s.error_status,
                    "retry_after": s.retry_after.map(|r| r.to_string()),
                    "fault_rate": s.fault_rate,
                    "fault": s.fault.as_str(),
                });
                (e.key.to_string(), shown)
            })
            .collect();
        let seed_from = if self.configured.is_some() {
            "bundle.toml"
        } else {
            "clock"
        };
        serde_json::json!({ "seed": self.seed, "seed_from": seed_from, "endpoints": endpoints })
    }

    /// The `Retry-After` of `endpoint`'s simulated errors, if it gives one.
    pub(crate) fn retry_after(&self, endpoint: usize) -> Option<&HeaderValue> {
        self.retry_after.get(endpoint)?.as_ref()
    }

    /// The draw of the next request to `endpoint` (an index into
    /// [`crate::api::API`]). Every endpoint shares the bundle's sequence.
    pub(crate) fn draw(&self, endpoint: usize) -> Draw {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let settings = self.endpoints.get(endpoint).copied().unwrap_or_default();
        draw_at(self.seed, n, &settings)
    }
}

/// The draw of request `n` of a sequence: a pure function, so a sequence can be replayed.
pub(crate) fn draw_at(seed: u64, n: u64, settings: &Settings) -> Draw {
    // Independent values per request: one for the delay, one for the error, one for the fault.
    // The fault's is mixed apart (not `base + 3 GOLDEN`, which is the next request's delay), so
    // the delays and errors of a seed are what they were before faults were drawn.
    let base = seed.wrapping_add(n.wrapping_mul(2).wrapping_mul(GOLDEN));
    let for_delay = mix(base.wrapping_add(GOLDEN));
    let for_error = mix(base.wrapping_add(GOLDEN.wrapping_mul(2)));
    let for_fault = mix(mix(base) ^ FAULT_STREAM);
    let (min, max) = settings.latency_ms;
    let span = max.saturating_sub(min).saturating_add(1);
    let delay_ms = if span <= 1 {
        min
    } else {
        min + for_delay % span
    };
    let fault = (unit(for_fault) < settings.fault_rate).then_some(settings.fault);
    let error =
        (fault.is_none() && unit(for_error) < settings.error_rate).then_some(settings.error_status);
    Draw {
        delay: Duration::from_millis(delay_ms),
        error,
        fault,
    }
}

/// Sets the faults' values apart from the delays' and errors' (any odd constant would do).
const FAULT_STREAM: u64 = 0x5851_F42D_4C95_7F2D;

/// A value in `[0, 1)` from the top 53 bits.
fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(latency_ms: (u64, u64), error_rate: f64) -> Settings {
        Settings {
            latency_ms,
            error_rate,
            ..Settings::default()
        }
    }

    #[test]
    fn the_same_seed_replays_the_same_sequence_and_another_differs() {
        let s = settings((0, 1000), 0.5);
        let seq = |seed| (0..64).map(|n| draw_at(seed, n, &s)).collect::<Vec<_>>();
        assert_eq!(seq(7), seq(7));
        assert_ne!(seq(7), seq(8));
        let sim = Simulation::new(&Simulate {
            seed: Some(7),
            endpoints: vec![s; crate::api::API.len()],
        });
        let drawn: Vec<Draw> = (0..64).map(|_| sim.draw(0)).collect();
        assert_eq!(drawn, seq(7));
    }

    /// Faults have a stream of their own: drawing them leaves a seed's delays and errors as
    /// they were; they come at their rate, and a request given one is given no error.
    #[test]
    fn faults_come_at_their_rate_and_leave_delays_and_errors_as_they_were() {
        let plain = settings((0, 1000), 0.5);
        let faulty = Settings {
            fault_rate: 0.2,
            fault: Fault::Truncate,
            ..plain
        };
        let mut faults = 0;
        for n in 0..10_000 {
            let (a, b) = (draw_at(9, n, &plain), draw_at(9, n, &faulty));
            assert_eq!(a.fault, None);
            assert_eq!(a.delay, b.delay, "request {n}");
            match b.fault {
                Some(f) => {
                    assert_eq!((f, b.error), (Fault::Truncate, None));
                    faults += 1;
                }
                None => assert_eq!(a.error, b.error, "request {n}"),
            }
        }
        // 2,000 expected; 5 standard deviations are ±200.
        assert!((1800..=2200).contains(&faults), "{faults} faults");
    }

    #[test]
    fn delays_cover_their_range_and_errors_their_rate() {
        let s = settings((20, 40), 0.3);
        let draws: Vec<Draw> = (0..10_000).map(|n| draw_at(42, n, &s)).collect();
        let ms: Vec<u64> = draws.iter().map(|d| d.delay.as_millis() as u64).collect();
        assert!(ms.iter().all(|m| (20..=40).contains(m)));
        assert!(ms.contains(&20) && ms.contains(&40), "both ends are drawn");
        let errors = draws.iter().filter(|d| d.error == Some(503)).count();
        // 3,000 expected; 5 standard deviations are ±229.
        assert!((2771..=3229).contains(&errors), "{errors} errors");
        let never = settings((5, 5), 0.0);
        let always = settings((5, 5), 1.0);
        for n in 0..100 {
            assert_eq!(draw_at(1, n, &never).error, None);
            assert_eq!(draw_at(1, n, &always).error, Some(503));
            assert_eq!(draw_at(1, n, &never).delay, Duration::from_millis(5));
        }
    }
}
