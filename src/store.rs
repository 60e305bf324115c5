//! The served state: an immutable [`Snapshot`] of prepared answers, behind an `ArcSwap`.
//!
//! Every answer is serialised here, once, before the snapshot is published: the request path is
//! a token lookup and a `Bytes` clone. Changing what is served means building a new snapshot and
//! swapping it in whole; a request that holds the old one keeps a consistent view until it ends.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;

use crate::load::{BundleReport, Loaded};
use crate::model::bodies::List;
use crate::model::records::PaymentDetail;
use crate::model::Bundle;
use crate::problem::{Location, Problem};

/// One bundle's answers, as the bytes sent on the wire.
#[derive(Debug)]
pub struct Prepared {
    pub name: Arc<str>,
    pub event: Bytes,
    pub payments: Bytes,
    pub submission: Bytes,
    pub submission_list: Bytes,
    pub hotsite: Bytes,
    /// The details answer for every payment reference (and every detail file).
    pub details: HashMap<Box<str>, Bytes>,
}

fn to_bytes<T: Serialize>(value: &T) -> serde_json::Result<Bytes> {
    serde_json::to_vec(value).map(Bytes::from)
}

impl Prepared {
    /// Serialises every answer of a bundle. A payment with a detail file answers that file's
    /// body; any other payment answers one row derived from the payment itself.
    pub fn new(bundle: &Bundle) -> serde_json::Result<Prepared> {
        let mut details = HashMap::with_capacity(bundle.payments.data.len() + bundle.details.len());
        for payment in &bundle.payments.data {
            if !bundle.details.contains_key(&payment.reference_payment) {
                let derived = List {
                    data: vec![PaymentDetail::derived_from(payment)],
                    extra: Default::default(),
                };
                details.insert(
                    payment.reference_payment.as_str().into(),
                    to_bytes(&derived)?,
                );
            }
        }
        for (reference, body) in &bundle.details {
            details.insert(reference.as_str().into(), to_bytes(body)?);
        }
        Ok(Prepared {
            name: bundle.name.as_str().into(),
            event: to_bytes(&bundle.event)?,
            payments: to_bytes(&bundle.payments)?,
            submission: to_bytes(&bundle.submission)?,
            submission_list: to_bytes(&bundle.submission_list)?,
            hotsite: to_bytes(&bundle.hotsite)?,
            details,
        })
    }
}

/// Everything served at one moment: token → bundle answers, and the `/status` body.
#[derive(Debug, Default)]
pub struct Snapshot {
    by_token: HashMap<Box<str>, Arc<Prepared>>,
    status: Bytes,
}

impl Snapshot {
    /// The bundle a token opens.
    pub fn bundle(&self, token: &str) -> Option<&Prepared> {
        self.by_token.get(token).map(Arc::as_ref)
    }

    /// The `/status` body.
    pub fn status(&self) -> &Bytes {
        &self.status
    }

    /// Prepares every served bundle of a load. A bundle whose answers cannot be serialised (not
    /// expected: the model only holds JSON values) gets an error in its report and is left out.
    pub fn build(mut loaded: Loaded) -> Snapshot {
        let mut by_token = HashMap::new();
        for report in &mut loaded.reports {
            let Some(bundle) = &report.bundle else {
                continue;
            };
            match Prepared::new(bundle) {
                Ok(prepared) => {
                    let prepared = Arc::new(prepared);
                    for token in &bundle.config.tokens {
                        by_token.insert(token.as_str().into(), Arc::clone(&prepared));
                    }
                }
                Err(e) => {
                    report.problems.push(Problem::error(
                        &report.dir,
                        Location::File,
                        format!("cannot prepare the answers: {e}"),
                    ));
                    report.bundle = None;
                }
            }
        }
        let status = status_body(&loaded);
        Snapshot { by_token, status }
    }
}

fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

#[derive(Serialize)]
struct StatusBody<'a> {
    bundles: Vec<BundleStatus<'a>>,
}

#[derive(Serialize)]
struct BundleStatus<'a> {
    name: &'a str,
    served: bool,
    id_event: Option<i64>,
    title: Option<&'a str>,
    /// How many tokens its bundle.toml names; never the tokens.
    tokens: usize,
    records: Option<Records>,
    loaded_at: String,
    errors: Vec<String>,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct Records {
    tickets: usize,
    payments: usize,
    payment_details: usize,
    submission_types: usize,
    topic_areas: usize,
    submissions: usize,
    page_areas: usize,
}

fn bundle_status(report: &BundleReport) -> BundleStatus<'_> {
    let bundle = report.bundle.as_ref();
    BundleStatus {
        name: &report.name,
        served: bundle.is_some(),
        id_event: bundle.map(|b| b.event.event.id_event),
        title: bundle.map(|b| b.event.event.title.as_str()),
        tokens: report.tokens.len(),
        records: bundle.map(|b| Records {
            tickets: b.event.event.tickets.len(),
            payments: b.payments.data.len(),
            payment_details: b.details.len(),
            submission_types: b.submission.submission_type.data.len(),
            topic_areas: b.submission.topic_area.data.len(),
            submissions: b.submission_list.submission.data.len(),
            page_areas: b.hotsite.areas.len(),
        }),
        loaded_at: timestamp(report.loaded_at),
        errors: report.errors().map(ToString::to_string).collect(),
        warnings: report.warnings().map(ToString::to_string).collect(),
    }
}

fn status_body(loaded: &Loaded) -> Bytes {
    let body = StatusBody {
        bundles: loaded.reports.iter().map(bundle_status).collect(),
    };
    // Only strings, integers and booleans: serialisation cannot fail.
    to_bytes(&body).unwrap_or_else(|_| Bytes::from_static(b"{\"bundles\":[]}"))
}

/// The current snapshot, swapped atomically.
#[derive(Debug)]
pub struct Store {
    current: ArcSwap<Snapshot>,
}

impl Store {
    pub fn new(snapshot: Snapshot) -> Self {
        Store {
            current: ArcSwap::from_pointee(snapshot),
        }
    }

    /// The snapshot to answer one request from. Cheap; hold it for the request's life.
    pub fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// Publishes a new snapshot; requests already holding the old one finish on it.
    pub fn replace(&self, snapshot: Snapshot) {
        self.current.store(Arc::new(snapshot));
    }
}
