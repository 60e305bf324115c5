//! The endpoint table: every route eventbox answers, each described once.
//!
//! [`API`] lists the API's endpoints, [`OPERATIONS`] the operations routes, in the same shape.
//! Everything that used to spell an endpoint out reads it from here: the router (paths, methods,
//! `Allow`), the metrics and log label, the `[simulate.endpoints.KEY]` names, the files `load`
//! knows (and its "unknown file" message), the record counts of `/status`, `pull`'s plan and its
//! record counting, the test server's bundle builder, and the OpenAPI test. Per-endpoint data in
//! `model::Bundle`, `prepare::Prepared` and `catalog::Summary` sits in slots indexed by [`API`].
//!
//! Adding an endpoint is an entry here, a record type (and its decoder) in `model`, gen code and
//! tests. An entry's feed says how it is authorised: [`Feed::Server`] routes need no
//! `Authorization-Token` (but `/_writes/reset`), the rest do; `app` adds `Authorization-App`; and
//! an operation's [`Operation::is_admin`] makes it an admin route (loopback or the admin token).
//! Paths with an `:id` become a [`Feed`] that answers one record of a list.

use serde_json::Value;

use crate::errors::ApiError;
use crate::model::bodies::{self, Records};
use crate::model::decode::Diag;
use crate::model::records::{Certificate, Submission};

/// The operations routes, answered by the server rather than from a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Healthz,
    Readyz,
    Status,
    Metrics,
    /// The request journal (`--journal`).
    Journal,
    /// `POST /_writes/reset`: forgets the writes of the token's bundle.
    WritesReset,
    /// `GET /_queue`: the writes waiting for their bundle's source, those parked, and those it
    /// refused; `DELETE /_queue?seq=N` dismisses one parked, refused or pending.
    Queue,
    /// `GET /_ui`: the status page for the person at the desk (kiosk mode). Not an admin route:
    /// the page holds no data; its script reads the admin routes, with the admin token the
    /// person types in when the server asks for one (a browser cannot send a bearer itself).
    Ui,
    OpenApi,
}

impl Operation {
    /// Whether it is an admin route: answered freely to a loopback peer, to any other only
    /// with the admin token (`--admin-token`, see `http::admin`). The probes' and scrapers'
    /// routes and the document stay open to everyone. No wildcard arm: a new operation decides.
    pub(crate) fn is_admin(self) -> bool {
        match self {
            Operation::Status | Operation::Journal | Operation::WritesReset | Operation::Queue => {
                true
            }
            Operation::Healthz
            | Operation::Readyz
            | Operation::Metrics
            | Operation::OpenApi
            | Operation::Ui => false,
        }
    }

    /// Whether a page of another origin may read it (CORS headers, with `--cors-origin`): the
    /// probes and the document, not the admin routes (`http::admin`), nor the metrics (every
    /// bundle's name, for any page the operator's browser opens), nor the same-origin status page.
    fn cross_origin(self) -> bool {
        match self {
            Operation::Healthz | Operation::Readyz | Operation::OpenApi => true,
            Operation::Status
            | Operation::Journal
            | Operation::WritesReset
            | Operation::Queue
            | Operation::Metrics
            | Operation::Ui => false,
        }
    }

    /// Whether the request journal keeps a request to it (`read`: a GET or HEAD). Not the
    /// journal itself, nor the status page and the reads its script polls every second,
    /// which pushed the desk's clients out of a journal within a minute and a half.
    pub(crate) fn journaled(self, read: bool) -> bool {
        match self {
            Operation::Journal | Operation::Ui => false,
            Operation::Status | Operation::Queue => !read,
            Operation::Healthz
            | Operation::Readyz
            | Operation::Metrics
            | Operation::WritesReset
            | Operation::OpenApi => true,
        }
    }
}

/// A body decoded from a whole file, type-erased so that a bundle keeps one per endpoint in a
/// slot: it serialises to the wire body and names its records for `/status`.
pub(crate) trait FileBody: Records + std::fmt::Debug + Send + Sync + 'static {
    /// The wire body: compact JSON.
    fn to_json(&self) -> serde_json::Result<Vec<u8>>;
    /// For the few places that need a body's own fields (the event's id and title).
    fn as_any(&self) -> &dyn std::any::Any;
}

impl<T: Records + serde::Serialize + std::fmt::Debug + Send + Sync + 'static> FileBody for T {
    fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Decodes one file's value into its body, collecting problems in `diag`.
pub(crate) trait Decode: Sync {
    fn decode(&self, v: &Value, diag: &mut Diag) -> Option<Box<dyn FileBody>>;
    /// The body served when the file is absent; `None`: the file is required.
    fn absent(&self) -> Option<Box<dyn FileBody>>;
}

/// A [`Decode`] from a typed decoder (`bodies::*_body`) and, for an optional file, the body an
/// absent file stands for.
pub(crate) struct Typed<T: 'static> {
    pub(crate) decode: fn(&Value, &mut Diag) -> Option<T>,
    pub(crate) absent: Option<fn() -> T>,
}

impl<T: FileBody> Decode for Typed<T> {
    fn decode(&self, v: &Value, diag: &mut Diag) -> Option<Box<dyn FileBody>> {
        (self.decode)(v, diag).map(|b| Box::new(b) as Box<dyn FileBody>)
    }

    fn absent(&self) -> Option<Box<dyn FileBody>> {
        self.absent.map(|f| Box::new(f()) as Box<dyn FileBody>)
    }
}

/// What feeds an endpoint's answers.
#[derive(Clone, Copy)]
pub(crate) enum Feed {
    /// The file `KEY.json` or `KEY.toml`, decoded whole.
    File(&'static dyn Decode),
    /// `KEY.json` streamed record by record (`model::payments`) into the served body
    /// (`prepare::PaymentsWriter`); the
    /// payments of the event, whose references key the [`Feed::PerReference`] answers.
    Stream,
    /// The folder `KEY/`, one `<reference>.json|.toml` per payment; a payment without a file
    /// answers a row derived from the streamed payments. Its `/status` records are named `KEY`.
    PerReference(&'static dyn Decode),
    /// One record of another entry's list (`list`, its key), by the last segment of the path
    /// (`{id}`); `missing` answers an id no record has. No file of its own.
    Item {
        list: &'static str,
        missing: ApiError,
    },
    /// A body derived from another entry's whole-file body (`from`, its key), made when the
    /// bundle is prepared: the schedule by day from the activities. No file of its own.
    Derived {
        from: &'static str,
        derive: fn(&dyn FileBody) -> serde_json::Result<Vec<u8>>,
    },
    /// A write (`POST`): what it does to the bundle's writes (`crate::writes`). No file.
    Write(WriteKind),
    /// An operations route.
    Server(Operation),
}

/// What a bundle folder holds for an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnDisk {
    /// `KEY.json` or `KEY.toml`, decoded whole or streamed.
    File,
    /// The folder `KEY/`, one `<reference>.json|.toml` per payment.
    Folder,
}

impl Feed {
    /// What a bundle folder holds for an endpoint fed this way; `None`: nothing of its own.
    pub(crate) fn on_disk(&self) -> Option<OnDisk> {
        match self {
            Feed::File(_) | Feed::Stream => Some(OnDisk::File),
            Feed::PerReference(_) => Some(OnDisk::Folder),
            Feed::Item { .. } | Feed::Derived { .. } | Feed::Write(_) | Feed::Server(_) => None,
        }
    }
}

/// The keys of the endpoints a bundle folder holds a `shape` for, in table order.
pub(crate) fn on_disk(shape: OnDisk) -> impl Iterator<Item = &'static str> {
    API.iter()
        .filter(move |e| e.feed.on_disk() == Some(shape))
        .map(|e| e.key)
}

/// Whether `key` names an endpoint a bundle folder holds a `shape` for.
pub(crate) fn is_on_disk(key: &str, shape: OnDisk) -> bool {
    on_disk(shape).any(|k| k == key)
}

/// The writes the API takes (`crate::writes::Admitted::apply` decodes and applies each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// `POST /attendees/create`.
    Register,
    /// `POST /checkin/attendees`.
    Checkin,
    /// `POST /checkin/sessions`.
    CheckinSessions,
}

impl WriteKind {
    /// The JSON string the service answers an accepted write with.
    pub(crate) fn acknowledgement(self) -> &'static [u8] {
        match self {
            WriteKind::Register => b"\"Data entered successfully.\"",
            WriteKind::Checkin | WriteKind::CheckinSessions => b"\"OK\"",
        }
    }
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Feed::File(_) => f.write_str("File"),
            Feed::Stream => f.write_str("Stream"),
            Feed::PerReference(_) => f.write_str("PerReference"),
            Feed::Item { list, .. } => write!(f, "Item({list})"),
            Feed::Derived { from, .. } => write!(f, "Derived({from})"),
            Feed::Write(kind) => write!(f, "Write({kind:?})"),
            Feed::Server(op) => write!(f, "Server({op:?})"),
        }
    }
}

/// Whether and how `pull` fetches an endpoint.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pull {
    No,
    /// One request to the path; `count` gives the records of its answer for the summary.
    List {
        count: fn(&Value) -> Option<usize>,
        /// A 404 whose body is an empty list is that list, empty (the platform's answer for
        /// attendees when there are none); false where a 404 is no answer (the event, the
        /// payments).
        empty_404: bool,
    },
    /// One request per payment reference, after the lists.
    PerPayment,
}

/// One route.
#[derive(Debug)]
pub(crate) struct Endpoint {
    /// The metrics and log label, the `[simulate.endpoints.KEY]` name and the bundle file stem.
    pub(crate) key: &'static str,
    /// The path as documented (in `openapi.json`); matched with or without a trailing slash and
    /// ignoring ASCII case.
    pub(crate) path: &'static str,
    /// Each method answered, with its OpenAPI `operationId`.
    pub(crate) methods: &'static [(&'static str, &'static str)],
    pub(crate) feed: Feed,
    pub(crate) pull: Pull,
    /// Whether it also needs `Authorization-App` (the company and institutional routes); a
    /// wrong token or app then answers the documented `InvalidAuthorization*` codes.
    pub(crate) app: bool,
}

/// Where every path of the API starts. A source's base URL ends with it (`pull --from`, a
/// desk's `[source] url`), and an endpoint's [`Endpoint::relative`] path follows it there.
pub(crate) const BASE: &str = "/api/v1";

impl Endpoint {
    /// Its path after [`BASE`], with its leading `/` (`/event`, `/payments/details`).
    pub(crate) fn relative(&self) -> &'static str {
        self.path.strip_prefix(BASE).unwrap_or(self.path)
    }
}

/// The length of an array member, if it is one.
fn len(v: &Value) -> Option<usize> {
    v.as_array().map(Vec::len)
}

/// Fetched by `pull`, its records counted in `data`.
const DATA_LIST: Pull = Pull::List {
    count: |v| len(&v["data"]),
    empty_404: true,
};

/// The decoder of a file that must be present.
macro_rules! required {
    ($decode:path) => {
        &Typed {
            decode: $decode,
            absent: None,
        }
    };
}

/// The decoder of a file that may be absent: its body is then the type's default (empty).
macro_rules! optional {
    ($decode:path) => {
        &Typed {
            decode: $decode,
            absent: Some(Default::default),
        }
    };
}

/// The API's endpoints. Their order is the order of `/status` record counts and of `pull`.
pub(crate) static API: [Endpoint; 20] = [
    Endpoint {
        key: "event",
        path: "/api/v1/event",
        methods: &[("GET", "getEvent"), ("HEAD", "headEvent")],
        feed: Feed::File(required!(bodies::event_body)),
        pull: Pull::List {
            count: |v| len(&v["data"]).or_else(|| len(v)).or(Some(1)),
            empty_404: false,
        },
        app: false,
    },
    Endpoint {
        key: "payments",
        path: "/api/v1/payments",
        methods: &[("GET", "getPayments"), ("HEAD", "headPayments")],
        feed: Feed::Stream,
        pull: Pull::List {
            count: |v| len(&v["data"]),
            empty_404: false,
        },
        app: false,
    },
    Endpoint {
        key: "payment_details",
        path: "/api/v1/payments/details",
        methods: &[("GET", "getPaymentDetails"), ("HEAD", "headPaymentDetails")],
        feed: Feed::PerReference(required!(bodies::details_body)),
        pull: Pull::PerPayment,
        app: false,
    },
    Endpoint {
        key: "submission",
        path: "/api/v1/submission/",
        methods: &[("GET", "getSubmission"), ("HEAD", "headSubmission")],
        feed: Feed::File(optional!(bodies::submission_body)),
        pull: Pull::List {
            count: |v| Some(len(&v["submission_type"]["data"])? + len(&v["topic_area"]["data"])?),
            empty_404: true,
        },
        app: false,
    },
    Endpoint {
        key: "submission_list",
        path: "/api/v1/submission/list",
        methods: &[("GET", "getSubmissionList"), ("HEAD", "headSubmissionList")],
        feed: Feed::File(optional!(bodies::nested_body::<Submission>)),
        pull: Pull::List {
            count: |v| len(&v["submission"]["data"]),
            empty_404: true,
        },
        app: false,
    },
    Endpoint {
        key: "hotsite",
        path: "/api/v1/hotsite/",
        methods: &[("GET", "getHotsite"), ("HEAD", "headHotsite")],
        feed: Feed::File(optional!(bodies::hotsite_body)),
        pull: Pull::List {
            count: |v| len(&v["areasSite"]),
            empty_404: true,
        },
        app: false,
    },
    Endpoint {
        key: "attendees",
        path: "/api/v1/attendees",
        methods: &[("GET", "getAttendees"), ("HEAD", "headAttendees")],
        feed: Feed::File(optional!(bodies::attendees_body)),
        pull: DATA_LIST,
        app: false,
    },
    route(
        "attendee_by_id",
        "/api/v1/attendees/{id}",
        &[("GET", "getAttendee"), ("HEAD", "headAttendee")],
        Feed::Item {
            list: "attendees",
            missing: ApiError::AttendeeNotFound,
        },
    ),
    Endpoint {
        key: "session",
        path: "/api/v1/session",
        methods: &[("GET", "getSessions"), ("HEAD", "headSessions")],
        feed: Feed::File(optional!(bodies::sessions_body)),
        pull: DATA_LIST,
        app: false,
    },
    route(
        "schedule",
        "/api/v1/session/getschedule",
        &[("GET", "getSchedule"), ("HEAD", "headSchedule")],
        Feed::Derived {
            from: "session",
            derive: bodies::schedule_json,
        },
    ),
    route(
        "session_by_id",
        "/api/v1/session/{id}",
        &[("GET", "getSession"), ("HEAD", "headSession")],
        Feed::Item {
            list: "session",
            missing: ApiError::RecordNotFound,
        },
    ),
    Endpoint {
        key: "speaker",
        path: "/api/v1/speaker",
        methods: &[("GET", "getSpeakers"), ("HEAD", "headSpeakers")],
        feed: Feed::File(optional!(bodies::speakers_body)),
        pull: DATA_LIST,
        app: false,
    },
    route(
        "speaker_by_id",
        "/api/v1/speaker/{id}",
        &[("GET", "getSpeaker"), ("HEAD", "headSpeaker")],
        Feed::Item {
            list: "speaker",
            missing: ApiError::RecordNotFound,
        },
    ),
    Endpoint {
        key: "certificates",
        path: "/api/v1/certificates",
        methods: &[("GET", "getCertificates"), ("HEAD", "headCertificates")],
        feed: Feed::File(optional!(bodies::nested_body::<Certificate>)),
        pull: Pull::List {
            count: |v| len(&v["certificates"]["data"]),
            empty_404: true,
        },
        app: false,
    },
    route(
        "attendee_create",
        "/api/v1/attendees/create",
        &[("POST", "createAttendee")],
        Feed::Write(WriteKind::Register),
    ),
    route(
        "checkin_attendees",
        "/api/v1/checkin/attendees",
        &[("POST", "checkinAttendees")],
        Feed::Write(WriteKind::Checkin),
    ),
    route(
        "checkin_sessions",
        "/api/v1/checkin/sessions",
        &[("POST", "checkinSessions")],
        Feed::Write(WriteKind::CheckinSessions),
    ),
    Endpoint {
        key: "company_events",
        path: "/api/v1/customclient/events",
        methods: &[("GET", "getCompanyEvents"), ("HEAD", "headCompanyEvents")],
        feed: Feed::File(optional!(bodies::company_events_body)),
        pull: DATA_LIST,
        app: true,
    },
    Endpoint {
        key: "custom_getdata",
        path: "/api/v1/custom/getdata",
        methods: &[("POST", "customGetData")],
        feed: Feed::File(&Typed {
            decode: bodies::custom_getdata_body,
            absent: Some(|| bodies::CustomBody::empty(bodies::RangeBy::EventDate)),
        }),
        pull: Pull::No,
        app: true,
    },
    Endpoint {
        key: "custom_getdatasubscribed",
        path: "/api/v1/custom/getdatasubscribed",
        methods: &[("POST", "customGetDataSubscribed")],
        feed: Feed::File(&Typed {
            decode: bodies::custom_subscribed_body,
            absent: Some(|| bodies::CustomBody::empty(bodies::RangeBy::Subscription)),
        }),
        pull: Pull::No,
        app: true,
    },
];

/// The operations routes.
pub(crate) static OPERATIONS: [Endpoint; 9] = [
    route(
        "healthz",
        "/healthz",
        &[("GET", "getHealth"), ("HEAD", "headHealth")],
        Feed::Server(Operation::Healthz),
    ),
    route(
        "readyz",
        "/readyz",
        &[("GET", "getReady"), ("HEAD", "headReady")],
        Feed::Server(Operation::Readyz),
    ),
    route(
        "status",
        "/status",
        &[("GET", "getStatus"), ("HEAD", "headStatus")],
        Feed::Server(Operation::Status),
    ),
    route(
        "metrics",
        "/metrics",
        &[("GET", "getMetrics"), ("HEAD", "headMetrics")],
        Feed::Server(Operation::Metrics),
    ),
    route(
        "journal",
        "/_journal",
        &[
            ("GET", "getJournal"),
            ("HEAD", "headJournal"),
            ("DELETE", "clearJournal"),
        ],
        Feed::Server(Operation::Journal),
    ),
    route(
        "ui",
        "/_ui",
        &[("GET", "getUi"), ("HEAD", "headUi")],
        Feed::Server(Operation::Ui),
    ),
    route(
        "queue",
        "/_queue",
        &[
            ("GET", "getQueue"),
            ("HEAD", "headQueue"),
            ("DELETE", "dismissQueued"),
        ],
        Feed::Server(Operation::Queue),
    ),
    route(
        "writes_reset",
        "/_writes/reset",
        &[("POST", "resetWrites")],
        Feed::Server(Operation::WritesReset),
    ),
    route(
        "openapi",
        "/openapi.json",
        &[("GET", "getOpenApi"), ("HEAD", "headOpenApi")],
        Feed::Server(Operation::OpenApi),
    ),
];

/// An entry `pull` does not fetch and `Authorization-App` does not guard.
const fn route(
    key: &'static str,
    path: &'static str,
    methods: &'static [(&'static str, &'static str)],
    feed: Feed,
) -> Endpoint {
    Endpoint {
        key,
        path,
        methods,
        feed,
        pull: Pull::No,
        app: false,
    }
}

/// The segment of a path that names one record.
const ID: &str = "{id}";

/// The label of a request that matched no route.
pub(crate) const UNKNOWN: &str = "unknown";

/// Where a request goes: an API endpoint (its index in [`API`]) or an operations route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Api(usize),
    Operation(usize),
}

impl Route {
    /// The route of a path, with or without one trailing slash. Like the service's web framework,
    /// matching ignores ASCII case. A fixed path wins over a `{id}` one (`/session/getschedule`
    /// is not the activity `getschedule`); `{id}` stands for one non-empty segment.
    pub(crate) fn of(path: &str) -> Option<Route> {
        let path = path.strip_suffix('/').unwrap_or(path);
        let fixed = |e: &Endpoint| {
            let own = e.path.strip_suffix('/').unwrap_or(e.path);
            !own.ends_with(ID) && own.eq_ignore_ascii_case(path)
        };
        let with_id = |e: &Endpoint| {
            e.path.strip_suffix(ID).is_some_and(|prefix| {
                path.len() > prefix.len()
                    && path.is_char_boundary(prefix.len())
                    && path[..prefix.len()].eq_ignore_ascii_case(prefix)
                    && !path[prefix.len()..].contains('/')
            })
        };
        let find = |matches: &dyn Fn(&Endpoint) -> bool| {
            API.iter()
                .position(matches)
                .map(Route::Api)
                .or_else(|| OPERATIONS.iter().position(matches).map(Route::Operation))
        };
        find(&fixed).or_else(|| find(&with_id))
    }

    /// The `{id}` of a path that matched a route with one: its last segment.
    pub(crate) fn id(path: &str) -> &str {
        let path = path.strip_suffix('/').unwrap_or(path);
        path.rsplit('/').next().unwrap_or(path)
    }

    /// Its table entry.
    pub(crate) fn endpoint(self) -> &'static Endpoint {
        match self {
            Route::Api(i) => &API[i],
            Route::Operation(i) => &OPERATIONS[i],
        }
    }

    /// The operations route it is, if it is one.
    pub(crate) fn operation(self) -> Option<Operation> {
        match self.endpoint().feed {
            Feed::Server(op) => Some(op),
            _ => None,
        }
    }

    /// Whether it is an admin route ([`Operation::is_admin`]); API routes never are.
    pub(crate) fn is_admin(self) -> bool {
        self.operation().is_some_and(Operation::is_admin)
    }

    /// Whether a page of another origin may read its answers ([`Operation::cross_origin`]);
    /// API routes may.
    pub(crate) fn cross_origin(self) -> bool {
        self.operation().is_none_or(Operation::cross_origin)
    }

    /// Whether it reads the request's body (a payment reference, a write, a date range).
    pub(crate) fn reads_body(self) -> bool {
        self.by_reference() || self.endpoint().methods.iter().any(|(m, _)| *m == "POST")
    }

    /// Whether it answers by a payment reference.
    pub(crate) fn by_reference(self) -> bool {
        matches!(self.endpoint().feed, Feed::PerReference(_))
    }

    /// The `endpoint` label of metrics and logs.
    pub(crate) fn label(route: Option<Route>) -> &'static str {
        route.map_or(UNKNOWN, |r| r.endpoint().key)
    }
}

/// The index in [`API`] of a key.
pub(crate) fn index_of(key: &str) -> Option<usize> {
    API.iter().position(|e| e.key == key)
}

/// The keys of [`API`], in order (the `[simulate.endpoints]` names).
pub(crate) fn keys() -> impl Iterator<Item = &'static str> {
    API.iter().map(|e| e.key)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn all() -> impl Iterator<Item = (Route, &'static Endpoint)> {
        (0..API.len())
            .map(Route::Api)
            .chain((0..OPERATIONS.len()).map(Route::Operation))
            .map(|r| (r, r.endpoint()))
    }

    #[test]
    fn the_router_resolves_every_entry_with_and_without_a_trailing_slash() {
        for (route, e) in all() {
            let bare = e.path.strip_suffix('/').unwrap_or(e.path);
            assert_eq!(Route::of(bare), Some(route), "{}", e.path);
            assert_eq!(Route::of(&format!("{bare}/")), Some(route), "{}", e.path);
            assert_eq!(
                Route::of(&bare.to_ascii_uppercase()),
                Some(route),
                "{}",
                e.path
            );
            assert_eq!(Route::of(&format!("{bare}//")), None, "{}", e.path);
        }
        assert_eq!(Route::of("/api/v1"), None);
        assert_eq!(Route::of("/"), None);
    }

    #[test]
    fn openapi_documents_exactly_the_table() {
        let doc: Value =
            serde_json::from_slice(crate::prepare::OPENAPI).expect("openapi.json is JSON");
        let paths = doc["paths"].as_object().expect("paths");
        let documented: BTreeSet<(String, String, String)> = paths
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, op)| op.is_object())
                    .map(move |(method, op)| {
                        (
                            path.clone(),
                            method.to_ascii_uppercase(),
                            op["operationId"].as_str().unwrap_or("").to_string(),
                        )
                    })
            })
            .collect();
        let table: BTreeSet<(String, String, String)> = all()
            .flat_map(|(_, e)| {
                e.methods
                    .iter()
                    .map(|(m, id)| (e.path.to_string(), m.to_string(), id.to_string()))
            })
            .collect();
        assert_eq!(documented, table);
        for e in &API {
            let method = e.methods[0].0.to_ascii_lowercase();
            assert_eq!(
                paths[e.path][method.as_str()]["security"][0]["token"],
                serde_json::json!([]),
                "{} is documented as needing the token",
                e.path
            );
        }
    }

    #[test]
    fn the_document_lists_the_tables_endpoints_and_only_routes_that_exist() {
        let doc: Value =
            serde_json::from_slice(crate::prepare::OPENAPI).expect("openapi.json is JSON");

        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
        let paths = doc["paths"].as_object().expect("paths");
        let reads = API
            .iter()
            .filter(|e| e.methods.iter().any(|(m, _)| *m == "GET"));
        for path in reads.map(|e| e.path) {
            let item = paths.get(path).unwrap_or_else(|| panic!("{path} missing"));
            assert!(item.get("head").is_some(), "{path}: HEAD is not described");
            let get = &item["get"];
            assert_eq!(get["security"][0]["token"], serde_json::json!([]), "{path}");
            for status in ["200", "304", "401", "406", "503"] {
                assert!(get["responses"].get(status).is_some(), "{path} {status}");
            }
        }
        for path in paths.keys() {
            assert!(Route::of(path).is_some(), "{path} is not a route");
        }
        for path in OPERATIONS.iter().map(|e| e.path) {
            assert!(paths.contains_key(path), "{path} missing");
        }
    }

    #[test]
    fn labels_are_exactly_the_keys_and_unique() {
        let labels: Vec<&str> = all().map(|(r, _)| Route::label(Some(r))).collect();
        let unique: BTreeSet<&str> = labels.iter().copied().collect();
        assert_eq!(labels.len(), unique.len(), "{labels:?}");
        assert!(!unique.contains(UNKNOWN));
        assert_eq!(Route::label(None), UNKNOWN);
        assert_eq!(keys().collect::<Vec<_>>(), labels[..API.len()].to_vec());
        for (i, key) in keys().enumerate() {
            assert_eq!(index_of(key), Some(i));
        }
    }

    /// An item or a derived body names an entry whose file is decoded whole (a typo would
    /// point the entry at itself, answering 503).
    #[test]
    fn items_and_derived_bodies_name_a_whole_file_entry() {
        for e in &API {
            let named = match e.feed {
                Feed::Item { list, .. } => list,
                Feed::Derived { from, .. } => from,
                _ => continue,
            };
            let target = index_of(named).map(|i| &API[i].feed);
            assert!(
                matches!(target, Some(Feed::File(_))),
                "{}: {named} is no whole-file entry",
                e.key
            );
        }
    }

    #[test]
    #[cfg(feature = "pull")]
    fn pull_plans_exactly_the_pulled_entries() {
        let plan = crate::pull::plan(true);
        let planned: Vec<&str> = plan
            .lists
            .iter()
            .map(|(e, _)| e.key)
            .chain(plan.per_payment.map(|(e, _)| e.key))
            .collect();
        // The lists in table order, then the one fetched per payment (it needs their references).
        let pulled: Vec<&str> = API
            .iter()
            .filter(|e| matches!(e.pull, Pull::List { .. }))
            .chain(API.iter().filter(|e| matches!(e.pull, Pull::PerPayment)))
            .map(|e| e.key)
            .collect();
        assert_eq!(planned, pulled);
        for (e, path) in plan.lists.iter().chain(plan.per_payment.iter()) {
            assert_eq!(format!("/api/v1/{path}"), e.path);
        }
        assert!(OPERATIONS.iter().all(|e| matches!(e.pull, Pull::No)));
    }
}
