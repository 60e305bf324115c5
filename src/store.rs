//! The served state: an immutable [`Snapshot`] of prepared answers (made by `prepare`), behind
//! an `ArcSwap`. (Which bundle versions go into a snapshot is decided by `catalog`.)
//!
//! The request path is a token lookup and a `Bytes` clone. Changing what is served means
//! building a new snapshot and swapping it in whole; a request that holds the old one keeps a
//! consistent view until it ends.

use std::collections::HashMap;
use std::hash::RandomState;
use std::sync::Arc;

use crate::prepare::{Prepared, Status};
use crate::token::{Token, TokenRef};
use arc_swap::{ArcSwap, Guard};
use bytes::Bytes;

/// Everything served at one moment: token → bundle answers, and the `/status` of the bundles.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    /// hashbrown (std's hasher, randomly keyed) for its `Equivalent` lookups: a request looks
    /// its borrowed token up, compared in constant time, without making a `Token`.
    by_token: hashbrown::HashMap<Token, Arc<Prepared>, RandomState>,
    status: Status,
    /// False for the empty snapshot served until the first load is published.
    ready: bool,
    /// The file watch is lost (the data folder was removed or replaced): `/readyz` says so.
    watch_lost: bool,
    /// Object storage is failing (`--data s3://...`): the last good bundles are served and
    /// `/readyz` says so.
    storage_failing: bool,
    /// Before the first load: why it has not happened yet (object storage that cannot be read),
    /// the `not_ready` answer with that reason in its message.
    waiting: Option<Bytes>,
    /// The tokens bundles' latest `bundle.toml` name that no served version has (the bundle
    /// has errors, in its files or a token clash, and no version loaded that the token opens),
    /// by token: a request with one is 503 `bundle_unavailable`, and the log says why once.
    unserved: hashbrown::HashMap<Token, Arc<Unserved>, RandomState>,
}

/// A bundle that names tokens but is not served.
#[derive(Debug)]
pub(crate) struct Unserved {
    pub(crate) name: String,
    /// Whether a request with one of its tokens was logged for this snapshot.
    said: std::sync::atomic::AtomicBool,
}

impl Unserved {
    pub(crate) fn new(name: String) -> Unserved {
        Unserved {
            name,
            said: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Snapshot {
    /// A published snapshot (ready).
    pub(crate) fn new(by_token: HashMap<Token, Arc<Prepared>>, status: Status) -> Snapshot {
        Snapshot {
            by_token: by_token.into_iter().collect(),
            status,
            ready: true,
            watch_lost: false,
            storage_failing: false,
            waiting: None,
            unserved: hashbrown::HashMap::default(),
        }
    }

    /// Adds the tokens of bundles that are not served ([`Snapshot::unserved`]).
    pub(crate) fn with_unserved(mut self, unserved: HashMap<Token, Arc<Unserved>>) -> Snapshot {
        self.unserved = unserved.into_iter().collect();
        self
    }

    /// For a token no served bundle has: the bundle not served that names it, and whether this
    /// is the first time this snapshot was asked (so that a client retrying logs one line per
    /// reload, not one per request).
    pub(crate) fn unserved(&self, token: TokenRef<'_>) -> Option<(&str, bool)> {
        let u = self.unserved.get(&token)?;
        let first = !u.said.swap(true, std::sync::atomic::Ordering::Relaxed);
        Some((u.name.as_str(), first))
    }

    /// The snapshot served before the first load, saying why it has not happened (`reason`).
    pub(crate) fn waiting(reason: &str) -> Snapshot {
        Snapshot {
            waiting: Some(crate::errors::detailed_body(
                crate::errors::ApiError::NotReady,
                reason,
            )),
            ..Snapshot::default()
        }
    }

    /// Marks object storage as failing (or not).
    pub(crate) fn with_storage_failing(mut self, failing: bool) -> Snapshot {
        self.storage_failing = failing;
        self
    }

    /// Whether object storage is failing: the bundles served are the last good ones.
    pub(crate) fn storage_failing(&self) -> bool {
        self.storage_failing
    }

    /// Why the first load has not happened, as the `not_ready` answer's body, when known.
    pub(crate) fn waiting_body(&self) -> Option<&Bytes> {
        self.waiting.as_ref()
    }

    /// Marks the file watch as lost (or not).
    pub(crate) fn with_watch_lost(mut self, lost: bool) -> Snapshot {
        self.watch_lost = lost;
        self
    }

    /// Whether the file watch is lost: changes on disk are not seen until it is restored.
    pub(crate) fn watch_lost(&self) -> bool {
        self.watch_lost
    }

    /// The bundle a token opens.
    pub(crate) fn bundle(&self, token: TokenRef<'_>) -> Option<&Prepared> {
        self.by_token.get(&token).map(Arc::as_ref)
    }

    /// The `/status` of the bundles.
    pub(crate) fn status(&self) -> &Status {
        &self.status
    }

    /// Whether no token opens a bundle.
    pub(crate) fn serves_nothing(&self) -> bool {
        self.by_token.is_empty()
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
    /// How many snapshots were published: the kiosk's tasks wake on a new one.
    published: tokio::sync::watch::Sender<u64>,
}

impl Store {
    pub(crate) fn new(snapshot: Snapshot) -> Self {
        Store {
            current: ArcSwap::from_pointee(snapshot),
            published: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Changes when a snapshot is published.
    pub(crate) fn published(&self) -> tokio::sync::watch::Receiver<u64> {
        self.published.subscribe()
    }

    /// The snapshot to answer one request from. Cheap; hold it for the request's life.
    pub(crate) fn snapshot(&self) -> Guard<Arc<Snapshot>> {
        self.current.load()
    }

    /// Publishes a new snapshot; requests already holding the old one finish on it.
    pub(crate) fn replace(&self, snapshot: Snapshot) {
        self.current.store(Arc::new(snapshot));
        self.published.send_modify(|n| *n = n.wrapping_add(1));
    }
}
