//! The served state: an immutable [`Snapshot`] of prepared answers, behind an `ArcSwap`.
//! (Which bundle versions go into a snapshot is decided by `catalog`.)
//!
//! Every answer is serialised here, once, before the snapshot is published: the request path is
//! a token lookup and a `Bytes` clone. Changing what is served means building a new snapshot and
//! swapping it in whole; a request that holds the old one keeps a consistent view until it ends.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;
use serde::Serialize;

use crate::model::bodies::List;
use crate::model::records::PaymentDetail;
use crate::model::Bundle;

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
    /// False for the empty snapshot served until the first load is published.
    ready: bool,
}

impl Snapshot {
    /// A published snapshot (ready).
    pub fn new(by_token: HashMap<Box<str>, Arc<Prepared>>, status: Bytes) -> Snapshot {
        Snapshot {
            by_token,
            status,
            ready: true,
        }
    }

    /// The bundle a token opens.
    pub fn bundle(&self, token: &str) -> Option<&Prepared> {
        self.by_token.get(token).map(Arc::as_ref)
    }

    /// The `/status` body.
    pub fn status(&self) -> &Bytes {
        &self.status
    }

    /// Whether the first load has been published.
    pub fn is_ready(&self) -> bool {
        self.ready
    }
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
