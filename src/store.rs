//! The served state: an immutable [`Snapshot`] of prepared answers (made by `prepare`), behind
//! an `ArcSwap`. (Which bundle versions go into a snapshot is decided by `catalog`.)
//!
//! The request path is a token lookup and a `Bytes` clone. Changing what is served means
//! building a new snapshot and swapping it in whole; a request that holds the old one keeps a
//! consistent view until it ends.

use std::collections::HashMap;
use std::sync::Arc;

use crate::prepare::Prepared;
use crate::token::Token;
use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;

/// Everything served at one moment: token → bundle answers, and the `/status` body.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    by_token: HashMap<Token, Arc<Prepared>>,
    status: Bytes,
    /// False for the empty snapshot served until the first load is published.
    ready: bool,
}

impl Snapshot {
    /// A published snapshot (ready).
    pub(crate) fn new(by_token: HashMap<Token, Arc<Prepared>>, status: Bytes) -> Snapshot {
        Snapshot {
            by_token,
            status,
            ready: true,
        }
    }

    /// The bundle a token opens.
    pub(crate) fn bundle(&self, token: &Token) -> Option<&Prepared> {
        self.by_token.get(token).map(Arc::as_ref)
    }

    /// The `/status` body.
    pub(crate) fn status(&self) -> &Bytes {
        &self.status
    }

    /// Whether the first load has been published.
    pub(crate) fn is_ready(&self) -> bool {
        self.ready
    }
}

/// The current snapshot, swapped atomically.
#[derive(Debug)]
pub(crate) struct Store {
    current: ArcSwap<Snapshot>,
}

impl Store {
    pub(crate) fn new(snapshot: Snapshot) -> Self {
        Store {
            current: ArcSwap::from_pointee(snapshot),
        }
    }

    /// The snapshot to answer one request from. Cheap; hold it for the request's life.
    pub(crate) fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// Publishes a new snapshot; requests already holding the old one finish on it.
    pub(crate) fn replace(&self, snapshot: Snapshot) {
        self.current.store(Arc::new(snapshot));
    }
}
