//! `serve --data s3://bucket/prefix`: bundles mirrored from object storage into a local folder,
//! which the normal loader then serves (one loader, one set of rules for what a bundle is).
//!
//! Every `--poll-interval` the prefix is listed. Each bundle folder (`prefix/NAME/...`) whose
//! objects changed (key, ETag, size) is downloaded whole into a staging folder beside its local
//! copy; the bundle is listed again, and only when that listing is the one the objects were read
//! at (one consistent set of versions) is the staging folder swapped in whole (`crate::stage`)
//! and the bundle reloaded (`crate::reload`), as the file watcher does. Otherwise it is retried
//! at the next poll. A bundle gone from storage is removed locally.
//!
//! A bundle with a manifest object ([`MANIFEST`], written first by `pull --into s3://...`, see
//! [`Target::publish`]) is taken only when its objects are exactly the manifest's files, with its sizes
//! and SHA-256 digests: a writer replacing a bundle object by object is never served half-way. A failed poll (no such
//! bucket, refused credentials, a store that hangs past `--store-timeout`) is logged and changes
//! nothing: the last good bundles keep serving.
//!
//! Credentials and endpoint come from the standard AWS environment variables
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
//! `AWS_ALLOW_HTTP`, ...), never from flags.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::{Path as StorePath, PathPart};
use object_store::{ClientOptions, ObjectStore};

use crate::catalog::{Scope, StorageTroubles};
use crate::reload::Reloader;
use crate::stage::Staging;

/// The stores bundles can come from, by the scheme of their URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Amazon S3 and compatible stores: `s3://bucket/prefix`.
    S3,
    /// Google Cloud Storage: `gs://bucket/prefix`.
    Gcs,
    /// Azure Blob Storage: `az://container/prefix`.
    Azure,
    /// A WebDAV server (listing by `PROPFIND`): `http://host[:port]/prefix`, or `https://`.
    Http { tls: bool },
}

/// Each scheme and its store: the one table.
const SCHEMES: [(&str, Kind); 5] = [
    ("s3", Kind::S3),
    ("gs", Kind::Gcs),
    ("az", Kind::Azure),
    ("http", Kind::Http { tls: false }),
    ("https", Kind::Http { tls: true }),
];

/// Where bundles come from: `s3://bucket/prefix` (or `gs://`, `az://`, `http(s)://`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Source {
    pub(crate) kind: Kind,
    /// The bucket (the container on Azure; `host[:port]` for a WebDAV server).
    pub(crate) bucket: String,
    /// Without leading or trailing `/`; empty for the whole bucket.
    pub(crate) prefix: String,
}

impl Source {
    /// A source read from a `--data` or `--into` value; `None` for a local folder.
    pub(crate) fn parse(data: &Path) -> Option<Result<Source, String>> {
        let text = data.to_str()?;
        let (kind, rest) = SCHEMES.iter().find_map(|(scheme, kind)| {
            let rest = text.strip_prefix(scheme)?.strip_prefix("://")?;
            Some((*kind, rest))
        })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Some(Err(format!("{text}: no bucket named")));
        }
        Some(Ok(Source {
            kind,
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
        }))
    }

    /// `prefix/NAME` split into the source of the bundles and the bundle's name (`pull --into`).
    pub(crate) fn parent_and_name(&self) -> Option<(Source, String)> {
        let (prefix, name) = self.prefix.rsplit_once('/').unwrap_or(("", &self.prefix));
        (!name.is_empty()).then(|| {
            let parent = Source {
                prefix: prefix.to_string(),
                ..self.clone()
            };
            (parent, name.to_string())
        })
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = SCHEMES
            .iter()
            .find(|(_, k)| *k == self.kind)
            .map_or("s3", |(s, _)| s);
        // A WebDAV URL may carry `user:password@`: never shown.
        match self.bucket.rsplit_once('@') {
            Some((_, host)) => write!(f, "{scheme}://***@{host}")?,
            None => write!(f, "{scheme}://{}", self.bucket)?,
        }
        if !self.prefix.is_empty() {
            write!(f, "/{}", self.prefix)?;
        }
        Ok(())
    }
}

/// The manifest object of a bundle, `prefix/NAME/_manifest.json`; not copied into the local
/// folder. Its writer puts it first; see [`Target::publish`].
pub(crate) const MANIFEST: &str = "_manifest.json";

/// What a bundle is made of when complete: each file (its path in the bundle folder) with its
/// size and the hex SHA-256 of its bytes. Other members are ignored, so a writer may add its
/// own (who wrote it, when).
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Manifest {
    pub(crate) files: BTreeMap<String, ManifestFile>,
}

#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ManifestFile {
    pub(crate) size: u64,
    pub(crate) sha256: String,
}

impl Manifest {
    /// Why `listing` (the manifest itself aside) is not the bundle the manifest describes, or
    /// `None` when it is, as far as a listing tells (the digests are checked on the bytes read).
    fn mismatch(&self, listing: &Listing) -> Option<String> {
        let mut missing = Vec::new();
        let mut sizes = Vec::new();
        for (file, want) in &self.files {
            match listing.get(file) {
                None => missing.push(file.as_str()),
                Some(v) if v.size != want.size => sizes.push(format!(
                    "{file} is {} bytes, the manifest says {}",
                    v.size, want.size
                )),
                Some(_) => {}
            }
        }
        let extra: Vec<&str> = listing
            .keys()
            .filter(|f| f.as_str() != MANIFEST && !self.files.contains_key(*f))
            .map(String::as_str)
            .collect();
        let mut why = Vec::new();
        if !missing.is_empty() {
            why.push(format!("missing {}", missing.join(", ")));
        }
        if !extra.is_empty() {
            why.push(format!("not in the manifest: {}", extra.join(", ")));
        }
        why.extend(sizes);
        (!why.is_empty()).then(|| why.join("; "))
    }
}

/// The hex SHA-256 of `bytes`, as a manifest gives it.
pub(crate) fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// What became of a bundle's copy.
#[derive(Debug)]
enum Copied {
    /// Read whole at one set of versions and swapped in.
    Swapped,
    /// Its objects changed while they were read.
    ChangedWhileRead,
    /// Its manifest says it is not all there yet (why).
    Incomplete(String),
}

/// One object as listed: what tells a version apart. The time counts too: a WebDAV server
/// need not give an ETag, and an edit may keep the size.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    etag: Option<String>,
    size: u64,
    modified: chrono::DateTime<chrono::Utc>,
}

impl Version {
    /// Whether both hold the same bytes as far as a listing tells: an ETag (a WebDAV server's
    /// may be missing) and the size, whatever the times.
    fn same_bytes(&self, other: &Version) -> bool {
        self.etag.is_some() && self.etag == other.etag && self.size == other.size
    }
}

/// A bundle's objects: path inside the bundle folder → version.
type Listing = BTreeMap<String, Version>;

/// The mirror of one source into one local folder.
#[derive(Debug)]
pub(crate) struct Mirror {
    source: Source,
    store: Arc<dyn ObjectStore>,
    dir: PathBuf,
    /// What each bundle held when it was last swapped in.
    synced: BTreeMap<String, Listing>,
    /// Bundles found incomplete (their manifest disagreeing), as listed then: not read again
    /// until their listing changes.
    waiting: BTreeMap<String, Listing>,
    /// `--store-timeout`: one request; a listing or a read may take twice that (a retry).
    timeout: Duration,
    /// The bundles the last attempt could not take, by name: state (`incomplete`, `failing`)
    /// and reason. Kept until the bundle is swapped in or gone from storage.
    troubles: StorageTroubles,
    /// The troubles [`Mirror::poll`] last told.
    told_troubles: StorageTroubles,
    /// Whether [`Mirror::poll`] last told that the listing failed.
    told_failing: bool,
}

/// Why a poll failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error("cannot list {from}: {}", chain(error))]
    List {
        from: Source,
        error: object_store::Error,
    },
    #[error("{from} did not answer within {}", humantime::format_duration(*.within))]
    Timeout { from: Source, within: Duration },
    /// The prefix holds `bundle.toml` at its top: a bundle given in place of the prefix above it,
    /// as `load::LoadError::IsABundle` for a folder.
    #[error("{from} is a bundle itself (it holds bundle.toml): give the prefix that holds its bundles, one level up")]
    IsABundle { from: Source },
}

/// An error and each error under it, `: `-separated: what the store's client said at every level
/// (the bottom one is the useful one: "operation timed out", "connection refused").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let said = e.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = e.source();
    }
    text
}

/// `Basic` credentials from a URL's `user:password` (percent-encoded, as a URL has them),
/// marked sensitive.
fn basic_auth(userinfo: &str) -> Option<hyper::header::HeaderValue> {
    use base64::Engine;
    let decoded = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let pair = format!("{}:{}", decoded(user), decoded(password));
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    let mut value = hyper::header::HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// A client for `source`'s bucket, configured from each store's standard environment variables
/// (`AWS_*`, `GOOGLE_*`, `AZURE_*`) and its instance metadata when they name no key, never from
/// flags. Plain HTTP only where asked for (`AWS_ALLOW_HTTP`, `GOOGLE_ALLOW_HTTP`,
/// `AZURE_ALLOW_HTTP`, or an `http://` WebDAV source): these options replace the ones the
/// builders read from the environment.
fn store(source: &Source, timeout: Duration) -> Result<Arc<dyn ObjectStore>, String> {
    use object_store::azure::MicrosoftAzureBuilder;
    use object_store::gcp::GoogleCloudStorageBuilder;
    use object_store::http::HttpBuilder;
    let allowed =
        |name: &str| std::env::var(name).is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    // A WebDAV `user:password@host`: the credentials go in a header, so that no URL object_store
    // builds (and prints in its errors) holds them.
    let (bucket, credentials) = match source.bucket.rsplit_once('@') {
        Some((userinfo, host)) if matches!(source.kind, Kind::Http { .. }) => {
            (host, basic_auth(userinfo))
        }
        _ => (source.bucket.as_str(), None),
    };
    let client = |allow_http: bool| {
        let options = ClientOptions::new()
            .with_allow_http(allow_http)
            .with_timeout(timeout)
            .with_connect_timeout(Duration::from_secs(5));
        match &credentials {
            Some(value) => {
                let mut headers = hyper::header::HeaderMap::new();
                headers.insert(hyper::header::AUTHORIZATION, value.clone());
                options.with_default_headers(headers)
            }
            None => options,
        }
    };
    let retry = object_store::RetryConfig {
        max_retries: 2,
        retry_timeout: timeout,
        ..Default::default()
    };
    // The four builders share no trait: the same steps, written once.
    macro_rules! build {
        ($builder:expr, $allow_http:expr) => {
            $builder
                .with_client_options(client($allow_http))
                .with_retry(retry)
                .build()
                .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
        };
    }
    let built: object_store::Result<Arc<dyn ObjectStore>> = match source.kind {
        Kind::S3 => build!(
            AmazonS3Builder::from_env().with_bucket_name(bucket),
            allowed("AWS_ALLOW_HTTP")
        ),
        Kind::Gcs => build!(
            GoogleCloudStorageBuilder::from_env().with_bucket_name(bucket),
            allowed("GOOGLE_ALLOW_HTTP")
        ),
        Kind::Azure => build!(
            MicrosoftAzureBuilder::from_env().with_container_name(bucket),
            allowed("AZURE_ALLOW_HTTP")
        ),
        Kind::Http { tls } => build!(
            HttpBuilder::new()
                .with_url(format!("{}://{bucket}", if tls { "https" } else { "http" })),
            !tls
        ),
    };
    built.map_err(|e| format!("cannot use {source}: {}", chain(&e)))
}

impl Mirror {
    /// A mirror of `source` into `dir` (created when missing), configured from the environment.
    pub(crate) fn new(source: Source, dir: PathBuf, timeout: Duration) -> Result<Mirror, String> {
        let store = store(&source, timeout)?;
        Mirror::over(source, store, dir, timeout)
    }

    /// A mirror of `source` read through `store`.
    fn over(
        source: Source,
        store: Arc<dyn ObjectStore>,
        dir: PathBuf,
        timeout: Duration,
    ) -> Result<Mirror, String> {
        // Inside the state folder, made first here: both its owner's only, as `writes::log`
        // makes the state folder (the copies hold people's data). The mirror folder is made
        // private also when an earlier version left it open: that closes every copy below it.
        crate::writes::log::private_dirs(&dir)
            .and_then(|()| crate::stage::private_folder(&dir))
            .map_err(|e| format!("cannot create the mirror folder {}: {e}", dir.display()))?;
        Ok(Mirror {
            store,
            source,
            dir,
            synced: BTreeMap::new(),
            waiting: BTreeMap::new(),
            timeout,
            troubles: BTreeMap::new(),
            told_troubles: BTreeMap::new(),
            told_failing: false,
        })
    }

    /// Where it copies from (`s3://bucket/prefix`; a WebDAV password hidden).
    pub(crate) fn source(&self) -> &Source {
        &self.source
    }

    /// The local folder served.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn root(&self) -> Option<StorePath> {
        (!self.source.prefix.is_empty()).then(|| StorePath::from(self.source.prefix.as_str()))
    }

    /// Lists `under` (the prefix, or one bundle in it): bundle name → its objects. Keys that
    /// cannot name a bundle file safely (a name the loader ignores, an odd segment) are skipped,
    /// but for the bundle's [`MANIFEST`].
    async fn list(
        &self,
        under: Option<&StorePath>,
    ) -> Result<BTreeMap<String, Listing>, SyncError> {
        let listed = tokio::time::timeout(
            self.timeout * 2,
            self.store.list(under).try_collect::<Vec<_>>(),
        )
        .await
        .map_err(|_| SyncError::Timeout {
            from: self.source.clone(),
            within: self.timeout * 2,
        })?
        .map_err(|error| SyncError::List {
            from: self.source.clone(),
            error,
        })?;
        let root: Vec<String> = self
            .root()
            .map(|r| r.parts().map(|p| p.as_ref().to_string()).collect())
            .unwrap_or_default();
        let mut bundles: BTreeMap<String, Listing> = BTreeMap::new();
        for meta in listed {
            let parts: Vec<String> = meta
                .location
                .parts()
                .map(|p| p.as_ref().to_string())
                .collect();
            let Some(rest) = parts.strip_prefix(root.as_slice()) else {
                continue;
            };
            let [name, file @ ..] = rest else { continue };
            if file.is_empty() && name == crate::load::BUNDLE_FILE {
                return Err(SyncError::IsABundle {
                    from: self.source.clone(),
                });
            }
            let manifest = matches!(file, [only] if only == MANIFEST);
            if file.is_empty()
                || !bundle_name(name)
                || !(manifest || file.iter().all(|s| bundle_file_segment(s)))
            {
                continue;
            }
            bundles.entry(name.clone()).or_default().insert(
                file.join("/"),
                Version {
                    etag: meta.e_tag,
                    size: meta.size,
                    modified: meta.last_modified,
                },
            );
        }
        Ok(bundles)
    }

    /// One poll: every changed bundle copied and swapped in whole, every vanished one removed.
    /// Returns the bundles changed on disk. `Err` when the prefix could not be listed (nothing
    /// changed then).
    pub(crate) async fn sync(&mut self) -> Result<BTreeSet<String>, SyncError> {
        let remote = self.list(self.root().as_ref()).await?;
        let mut changed = BTreeSet::new();
        for (name, listing) in &remote {
            if self.synced.get(name) == Some(listing) {
                // Back to what was swapped in (a stray object put there and removed): nothing
                // to take, nothing wrong.
                self.waiting.remove(name);
                self.troubles.remove(name);
                continue;
            }
            if self.waiting.get(name) == Some(listing) {
                continue;
            }
            self.waiting.remove(name);
            match self.copy(name, listing).await {
                Ok(Copied::Swapped) => {
                    self.synced.insert(name.clone(), listing.clone());
                    self.troubles.remove(name);
                    changed.insert(name.clone());
                }
                Ok(Copied::ChangedWhileRead) => tracing::info!(
                    bundle = %name,
                    "bundle changed in storage while it was read; retried at the next poll"
                ),
                Ok(Copied::Incomplete(why)) => {
                    tracing::info!(
                        bundle = %name,
                        "bundle not complete in storage by its manifest ({why}); {}",
                        self.keeps(name)
                    );
                    self.waiting.insert(name.clone(), listing.clone());
                    let why = format!("not complete by its manifest: {why}");
                    self.troubles.insert(name.clone(), ("incomplete", why));
                }
                Err(e) => {
                    let keeps = self.keeps(name);
                    tracing::error!(bundle = %name, "cannot mirror the bundle: {e}; {keeps}");
                    self.troubles.insert(name.clone(), ("failing", e));
                }
            }
        }
        // The folders of the mirror, not only those synced by this process: a bundle mirrored
        // into `--state` by an earlier run and deleted from storage since goes too.
        let mut gone: BTreeSet<String> = self
            .synced
            .keys()
            .filter(|n| !remote.contains_key(*n))
            .cloned()
            .collect();
        if let Ok(local) = std::fs::read_dir(&self.dir) {
            gone.extend(
                local
                    .flatten()
                    .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| bundle_name(n) && !remote.contains_key(n)),
            );
        }
        self.waiting.retain(|n, _| remote.contains_key(n));
        self.troubles.retain(|n, _| remote.contains_key(n));
        for name in gone {
            self.synced.remove(&name);
            let local = self.dir.join(&name);
            if let Err(e) = std::fs::remove_dir_all(&local) {
                tracing::warn!(bundle = %name, "cannot remove {}: {e}", local.display());
            }
            tracing::info!(bundle = %name, "bundle gone from storage; removed from the mirror");
            changed.insert(name);
        }
        Ok(changed)
    }

    /// What serves while bundle `name` cannot be taken from storage: the copy in the mirror's
    /// folder, this run's or an earlier one's, if there is one.
    fn keeps(&self, name: &str) -> &'static str {
        if self.dir.join(name).is_dir() {
            "the last good copy keeps serving"
        } else {
            "not served until it can be"
        }
    }

    /// One [`Mirror::sync`], told to `reloader` when it changes what `/status` shows: object
    /// storage failing or answering again, the bundles that could not be taken. The caller logs
    /// a failure and reloads what changed.
    pub(crate) async fn poll(
        &mut self,
        reloader: &Arc<Reloader>,
    ) -> Result<BTreeSet<String>, SyncError> {
        let result = self.sync().await;
        let failing = result.as_ref().err().map(ToString::to_string);
        if failing.is_some() || self.told_failing {
            if failing.is_none() {
                tracing::info!(source = %self.source, "object storage answers again");
            }
            self.told_failing = failing.is_some();
            let reloader = Arc::clone(reloader);
            let _ =
                tokio::task::spawn_blocking(move || reloader.set_storage_failing(failing)).await;
        }
        if self.told_troubles != self.troubles {
            self.told_troubles.clone_from(&self.troubles);
            let (reloader, troubles) = (Arc::clone(reloader), self.troubles.clone());
            let _ =
                tokio::task::spawn_blocking(move || reloader.set_storage_bundles(&troubles)).await;
        }
        result
    }

    /// Downloads every object of `name` into a staging folder; swaps it in when the bundle's
    /// manifest, if it has one, agrees with what was read and a new listing of the bundle
    /// matches `listing`.
    async fn copy(&self, name: &str, listing: &Listing) -> Result<Copied, String> {
        let target = self.dir.join(name);
        let staging = Staging::create(&target, "mirror", true).map_err(|e| e.to_string())?;
        crate::stage::private_folder(staging.path())
            .map_err(|e| format!("cannot make {} private: {e}", staging.path().display()))?;
        let bundle = object_at(&self.root().unwrap_or_default(), name)?;
        let manifest = match listing.get(MANIFEST) {
            None => None,
            Some(_) => {
                let location = object_at(&bundle, MANIFEST)?;
                let bytes = self.read(&location).await?;
                let manifest: Manifest = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("{location} is not a manifest: {e}"))?;
                if let Some(why) = manifest.mismatch(listing) {
                    return Ok(Copied::Incomplete(why));
                }
                // Not copied: the local folder holds the bundle's files, and nothing else.
                Some(manifest)
            }
        };
        let kept = self.synced.get(name);
        for file in listing.keys().filter(|f| f.as_str() != MANIFEST) {
            let location = object_at(&bundle, file)?;
            // An object at the version (ETag and size) last swapped in is copied from the local
            // copy, not read again: one changed file among 200,000 detail files is one read, and
            // a publish that writes every object again (new times, same bytes) reads only those
            // whose bytes changed.
            let unchanged = kept
                .and_then(|k| k.get(file))
                .zip(listing.get(file))
                .is_some_and(|(was, now)| was.same_bytes(now));
            let local = unchanged
                .then(|| std::fs::read(target.join(file)).ok())
                .flatten();
            let bytes = match local {
                Some(bytes) => bytes::Bytes::from(bytes),
                None => self.read(&location).await?,
            };
            if let Some(want) = manifest.as_ref().and_then(|m| m.files.get(file)) {
                let got = sha256(&bytes);
                if !got.eq_ignore_ascii_case(&want.sha256) {
                    return Ok(Copied::Incomplete(format!(
                        "{file} has other bytes than the manifest's (SHA-256 {got}, the manifest says {})",
                        want.sha256
                    )));
                }
            }
            write(&staging.path().join(file), &bytes)?;
        }
        let again = self.list(Some(&bundle)).await.map_err(|e| e.to_string())?;
        if again.get(name) != Some(listing) {
            return Ok(Copied::ChangedWhileRead);
        }
        staging.commit_in_place().map_err(|e| e.to_string())?;
        Ok(Copied::Swapped)
    }

    /// One object's bytes, within twice the store timeout (a request and its retry).
    async fn read(&self, location: &StorePath) -> Result<bytes::Bytes, String> {
        let read = async { self.store.get(location).await?.bytes().await };
        tokio::time::timeout(self.timeout * 2, read)
            .await
            .map_err(|_| {
                format!(
                    "{location} did not arrive within {}",
                    humantime::format_duration(self.timeout * 2)
                )
            })?
            .map_err(|e| format!("cannot read {location}: {}", chain(&e)))
    }
}

/// Writes a new file of a copy, creating its folder: its owner's only, as `pull` writes them
/// (`bundle.toml` names the tokens, the rest holds people's data).
fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        crate::writes::log::private_dirs(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    crate::stage::write_private(path, bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `eventbox pull --into s3://bucket/prefix/NAME`: bundle `name` of `source`, where a pull is
/// published.
pub(crate) struct Target {
    store: Arc<dyn ObjectStore>,
    source: Source,
    name: String,
    bundle: StorePath,
    timeout: Duration,
}

impl Target {
    /// Bundle `name` of `source`, through a client configured as [`store`] says.
    pub(crate) fn new(source: &Source, name: &str, timeout: Duration) -> Result<Target, String> {
        Target::over(store(source, timeout)?, source, name, timeout)
    }

    fn over(
        store: Arc<dyn ObjectStore>,
        source: &Source,
        name: &str,
        timeout: Duration,
    ) -> Result<Target, String> {
        Ok(Target {
            bundle: bundle_path(source, name)?,
            store,
            source: source.clone(),
            name: name.to_string(),
            timeout,
        })
    }

    /// Whether the bundle may be replaced, asked before anything is pulled. The rule of a local
    /// target (`stage::check_target`): its prefix holds nothing, or a bundle (`bundle.toml` or
    /// a manifest at its top); a prefix holding other objects (the bundles of a mistyped
    /// `--into s3://bucket/prefix`) is refused unless `force`, since publishing deletes what
    /// the new bundle does not hold.
    pub(crate) async fn check(&self, force: bool) -> Result<(), TargetError> {
        let held = held(&*self.store, &self.bundle)
            .await
            .map_err(|e| TargetError::Unreachable(format!("{}: {e}", self.source)))?;
        refuse(&self.source, &self.name, &held, force).map_err(TargetError::Refused)
    }

    /// Uploads the bundle folder `dir` as the bundle, refused as [`Target::check`] says. Its
    /// [`Manifest`] first; then every file; then the bundle's objects that are no longer in it
    /// are deleted. A mirror reading the bundle meanwhile finds its objects disagreeing with
    /// the manifest (missing, extra, other sizes or other bytes) and keeps serving its last
    /// good copy; a publish cut short leaves a bundle that is never served until a publish
    /// completes, even the first one. Returns how many files.
    pub(crate) async fn publish(&self, dir: &Path, force: bool) -> Result<usize, String> {
        let (store, bundle, timeout) = (&*self.store, &self.bundle, self.timeout);
        let held = held(store, bundle).await?;
        refuse(&self.source, &self.name, &held, force)?;
        let mut files = Vec::new();
        walk(dir, "", &mut files)?;
        let read = |path: &Path| {
            crate::read::read(path, crate::read::DEFAULT_MAX_FILE_BYTES)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        // Read twice, to hash and then to upload, rather than held whole: 200,000 detail files.
        let mut manifest = Manifest {
            files: BTreeMap::new(),
        };
        for (rel, path) in &files {
            let bytes = read(path)?;
            manifest.files.insert(
                rel.clone(),
                ManifestFile {
                    size: bytes.len() as u64,
                    sha256: sha256(&bytes),
                },
            );
        }
        let body = serde_json::to_vec_pretty(&manifest).map_err(|e| e.to_string())?;
        let location = object_at(bundle, MANIFEST)?;
        put(store, &location, body, timeout).await?;
        for (rel, path) in &files {
            let location = object_at(bundle, rel)?;
            put(store, &location, read(path)?, timeout).await?;
        }
        let stale = held
            .iter()
            .filter(|rel| *rel != MANIFEST && !manifest.files.contains_key(*rel));
        for rel in stale {
            let location = object_at(bundle, rel)?;
            store
                .delete(&location)
                .await
                .map_err(|e| format!("cannot delete {location}: {}", chain(&e)))?;
        }
        Ok(files.len())
    }
}

/// The objects under `bundle/`, by their path inside it.
async fn held(store: &dyn ObjectStore, bundle: &StorePath) -> Result<Vec<String>, String> {
    let listed = store
        .list(Some(bundle))
        .try_collect::<Vec<_>>()
        .await
        .map_err(|e| format!("cannot list {bundle}: {}", chain(&e)))?;
    let inside = format!("{bundle}/");
    Ok(listed
        .into_iter()
        .filter_map(|m| {
            m.location
                .as_ref()
                .strip_prefix(&inside)
                .map(str::to_string)
        })
        .collect())
}

/// Why [`Target::check`] did not clear a target.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TargetError {
    /// The prefix holds what publishing would delete: `--into` is unusable as given.
    #[error("{0}")]
    Refused(String),
    /// The storage could not be asked (down, no such bucket, credentials refused): another
    /// try may do.
    #[error("{0}")]
    Unreachable(String),
}

/// [`Target::check`]'s rule over what the bundle's prefix holds.
fn refuse(source: &Source, name: &str, held: &[String], force: bool) -> Result<(), String> {
    let is_bundle = held
        .iter()
        .any(|rel| rel == crate::load::BUNDLE_FILE || rel == MANIFEST);
    if force || is_bundle || held.is_empty() {
        return Ok(());
    }
    let mut bundles = BTreeSet::new();
    let mut others = BTreeSet::new();
    for rel in held {
        match rel.split_once('/') {
            Some((top, file)) if file == crate::load::BUNDLE_FILE => bundles.insert(top),
            Some((top, _)) => others.insert(top),
            None => others.insert(rel.as_str()),
        };
    }
    let others = others.difference(&bundles).map(|s| s.to_string()).collect();
    let refusal = crate::stage::Refusal::NotABundle {
        dir: PathBuf::from(format!("{source}/{name}")),
        bundles: bundles.into_iter().map(str::to_string).collect(),
        others,
    };
    Err(format!("--into {source}/{name}: {refusal}"))
}

/// Where bundle `name` of `source` is, when `name` can name a bundle there.
fn bundle_path(source: &Source, name: &str) -> Result<StorePath, String> {
    if !bundle_name(name) {
        return Err(format!("{name:?} cannot name a bundle in {source}"));
    }
    object_at(&StorePath::from(source.prefix.as_str()), name)
}

/// The object at `rel` (segments joined by `/`, as listed) under `dir`. Its segments are taken
/// as they are: `StorePath::from` and `child` percent-encode what is not ASCII, so an object
/// listed as `é.json` would be asked for as `%C3%A9.json`, which does not exist.
fn object_at(dir: &StorePath, rel: &str) -> Result<StorePath, String> {
    let parts = rel
        .split('/')
        .map(|s| PathPart::parse(s).map_err(|e| format!("{dir}/{rel} cannot name an object: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(dir.parts().chain(parts).collect())
}

async fn put(
    store: &dyn ObjectStore,
    location: &StorePath,
    bytes: Vec<u8>,
    timeout: Duration,
) -> Result<(), String> {
    tokio::time::timeout(timeout * 2, store.put(location, bytes.into()))
        .await
        .map_err(|_| {
            format!(
                "{location} was not written within {}",
                humantime::format_duration(timeout * 2)
            )
        })?
        .map(|_| ())
        .map_err(|e| format!("cannot write {location}: {}", chain(&e)))
}

/// The files of a bundle folder, as (path in the bundle with `/`, path on disk); names the
/// loader ignores are left out.
fn walk(dir: &Path, under: &str, out: &mut Vec<(String, PathBuf)>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !bundle_file_segment(&name) || (under.is_empty() && name == MANIFEST) {
            continue;
        }
        let rel = if under.is_empty() {
            name
        } else {
            format!("{under}/{name}")
        };
        let path = entry.path();
        if path.is_dir() {
            walk(&path, &rel, out)?;
        } else {
            out.push((rel, path));
        }
    }
    Ok(())
}

/// A path segment that names only itself: not empty, no separator, no NUL.
fn plain(segment: &str) -> bool {
    !segment.is_empty() && !segment.contains(['/', '\\', '\0'])
}

/// A name the loader serves as a bundle (`load::ignored`).
fn bundle_name(segment: &str) -> bool {
    plain(segment) && !crate::load::ignored(segment)
}

/// A name the loader reads inside a bundle (`load::hidden`): a payment reference may start
/// with `_`.
fn bundle_file_segment(segment: &str) -> bool {
    plain(segment) && !crate::load::hidden(segment)
}

/// The mirror running: polls every `every` and reloads what changed. Dropping it stops it.
#[derive(Debug)]
pub(crate) struct Running(tokio::task::JoinHandle<()>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Polls `mirror` every `every` (its first sync already done), reloading the bundles that
/// changed. Needs a tokio runtime.
pub(crate) fn spawn(mut mirror: Mirror, every: Duration, reloader: Arc<Reloader>) -> Running {
    Running(tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match mirror.poll(&reloader).await {
                Ok(changed) => {
                    if !changed.is_empty() {
                        let reloader = Arc::clone(&reloader);
                        let _ = tokio::task::spawn_blocking(move || {
                            reloader.reload(&Scope::Bundles(changed))
                        })
                        .await;
                    }
                }
                Err(e) => {
                    // Every failure is logged, not once: the operator sees it is still failing.
                    tracing::error!("{e}; the last good bundles keep serving");
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_s3_sources() {
        assert_eq!(Source::parse(Path::new("data")), None);
        assert_eq!(
            Source::parse(Path::new("s3://b/p/q/")),
            Some(Ok(Source {
                kind: Kind::S3,
                bucket: "b".into(),
                prefix: "p/q".into()
            }))
        );
        assert_eq!(
            Source::parse(Path::new("s3://b")),
            Some(Ok(Source {
                kind: Kind::S3,
                bucket: "b".into(),
                prefix: String::new()
            }))
        );
        assert!(matches!(Source::parse(Path::new("s3:///x")), Some(Err(_))));
        assert_eq!(Source::parse(Path::new("ftp://b/p")), None);
        for (url, kind) in [
            ("gs://b/p", Kind::Gcs),
            ("az://b/p", Kind::Azure),
            ("http://127.0.0.1:8000/p", Kind::Http { tls: false }),
            ("https://dav.example/p", Kind::Http { tls: true }),
        ] {
            let source = Source::parse(Path::new(url))
                .expect("a source")
                .expect("valid");
            assert_eq!(source.kind, kind, "{url}");
            assert_eq!(source.to_string(), url);
        }
        let into = Source::parse(Path::new("s3://b/events/summit"))
            .expect("a source")
            .expect("valid");
        let (parent, name) = into.parent_and_name().expect("a bundle named");
        assert_eq!(
            (parent.to_string().as_str(), name.as_str()),
            ("s3://b/events", "summit")
        );
        let bare = Source::parse(Path::new("s3://b"))
            .expect("a source")
            .expect("valid");
        assert_eq!(bare.parent_and_name(), None);
        // A WebDAV password reaches the store, never a message.
        let dav = Source::parse(Path::new("https://me:s3cret@dav.example/p"))
            .expect("a source")
            .expect("valid");
        assert_eq!(dav.bucket, "me:s3cret@dav.example");
        assert_eq!(dav.to_string(), "https://***@dav.example/p");
    }

    #[test]
    fn a_listing_is_its_manifests_bundle_only_with_the_same_files_and_sizes() {
        let v = |size| Version {
            etag: None,
            size,
            modified: chrono::DateTime::UNIX_EPOCH,
        };

        let file = |size| ManifestFile {
            size,
            sha256: "ab".into(),
        };
        let manifest = Manifest {
            files: [("a.json".into(), file(2)), ("d/b.json".into(), file(3))].into(),
        };
        let whole: Listing = [
            ("a.json".into(), v(2)),
            ("d/b.json".into(), v(3)),
            (MANIFEST.into(), v(9)),
        ]
        .into();
        assert_eq!(manifest.mismatch(&whole), None);

        let mut missing = whole.clone();
        missing.remove("d/b.json");
        assert_eq!(
            manifest.mismatch(&missing).as_deref(),
            Some("missing d/b.json")
        );
        let mut extra = whole.clone();
        extra.insert("c.json".into(), v(1));
        assert_eq!(
            manifest.mismatch(&extra).as_deref(),
            Some("not in the manifest: c.json")
        );
        let mut resized = whole;
        resized.insert("a.json".into(), v(4));
        assert_eq!(
            manifest.mismatch(&resized).as_deref(),
            Some("a.json is 4 bytes, the manifest says 2")
        );
    }

    /// An in-memory store that records the objects read and, once, changes an object while
    /// another is being read.
    #[derive(Debug, Default)]
    struct Storage {
        inner: object_store::memory::InMemory,
        reads: std::sync::Mutex<Vec<String>>,
        /// When the first path is read: the second is written with these bytes first.
        change_on_read: std::sync::Mutex<Option<(String, String, &'static str)>>,
        /// How many more writes succeed (`None`: all), as a connection that drops would.
        puts_left: std::sync::Mutex<Option<usize>>,
        /// Objects whose reads are refused, as a store denying access to them would.
        refused: std::sync::Mutex<BTreeSet<String>>,
        /// Each object's ETag as S3 makes it, from its bytes (`InMemory` counts writes): the
        /// same bytes written again list with the same ETag and a new time.
        etags: std::sync::Mutex<BTreeMap<String, String>>,
    }

    impl std::fmt::Display for Storage {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Storage")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for Storage {
        async fn put_opts(
            &self,
            location: &StorePath,
            payload: object_store::PutPayload,
            opts: object_store::PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            if let Some(left) = self.puts_left.lock().expect("lock").as_mut() {
                if *left == 0 {
                    return Err(object_store::Error::Generic {
                        store: "Storage",
                        source: "the connection dropped".into(),
                    });
                }
                *left -= 1;
            }
            let bytes: Vec<u8> = payload.iter().flat_map(|b| b.to_vec()).collect();
            self.etags
                .lock()
                .expect("lock")
                .insert(location.to_string(), sha256(&bytes));
            self.inner.put_opts(location, payload, opts).await
        }
        async fn put_multipart_opts(
            &self,
            location: &StorePath,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &StorePath,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            self.reads.lock().expect("lock").push(location.to_string());
            if self
                .refused
                .lock()
                .expect("lock")
                .contains(location.as_ref())
            {
                return Err(object_store::Error::Generic {
                    store: "Storage",
                    source: "access denied".into(),
                });
            }
            let got = self.inner.get_opts(location, options).await?;
            let due = {
                let mut change = self.change_on_read.lock().expect("lock");
                if change
                    .as_ref()
                    .is_some_and(|(when, _, _)| when == location.as_ref())
                {
                    change.take()
                } else {
                    None
                }
            };
            if let Some((_, what, bytes)) = due {
                let bytes = bytes::Bytes::from_static(bytes.as_bytes());
                self.inner.put(&StorePath::from(what), bytes.into()).await?;
            }
            Ok(got)
        }
        async fn delete(&self, location: &StorePath) -> object_store::Result<()> {
            self.inner.delete(location).await
        }
        fn list(
            &self,
            prefix: Option<&StorePath>,
        ) -> futures_util::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
        {
            use futures_util::StreamExt;
            let etags = self.etags.lock().expect("lock").clone();
            self.inner
                .list(prefix)
                .map(move |meta| {
                    meta.map(|mut meta| {
                        meta.e_tag = etags.get(meta.location.as_ref()).cloned();
                        meta
                    })
                })
                .boxed()
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&StorePath>,
        ) -> object_store::Result<object_store::ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy(&self, from: &StorePath, to: &StorePath) -> object_store::Result<()> {
            self.inner.copy(from, to).await
        }
        async fn copy_if_not_exists(
            &self,
            from: &StorePath,
            to: &StorePath,
        ) -> object_store::Result<()> {
            self.inner.copy_if_not_exists(from, to).await
        }
    }

    /// A mirror of `prefix` (an `s3://` URL) of `storage` into `dir`.
    fn mirror_of(storage: &Arc<Storage>, prefix: &str, dir: &Path) -> Mirror {
        let source = Source::parse(Path::new(prefix))
            .expect("s3")
            .expect("valid");
        let timeout = Duration::from_secs(5);
        Mirror::over(source, storage.clone(), dir.to_path_buf(), timeout).expect("mirror")
    }

    /// A [`Storage`] holding `objects` (key, body).
    async fn storage_with(objects: &[(&str, &'static str)]) -> Arc<Storage> {
        let storage = Arc::new(Storage::default());
        for (key, body) in objects {
            storage
                .put(
                    &StorePath::parse(key).expect("a key"),
                    bytes::Bytes::from_static(body.as_bytes()).into(),
                )
                .await
                .expect("put");
        }
        storage
    }

    #[tokio::test]
    async fn a_bundle_changed_while_read_is_taken_at_the_next_poll_and_unchanged_objects_are_not_read_again(
    ) {
        let storage = storage_with(&[
            ("events/demo/bundle.toml", "tokens = [\"t\"]\n"),
            ("events/demo/a.json", "\"a1\""),
            ("events/demo/b.json", "\"b1\""),
        ])
        .await;
        let tmp = tempfile::tempdir().expect("tmp");
        let mut mirror = mirror_of(&storage, "s3://bucket/events", &tmp.path().join("mirror"));
        let local =
            |file: &str| std::fs::read_to_string(tmp.path().join("mirror/demo").join(file)).ok();

        // b.json is rewritten while a.json is read: nothing is swapped in.
        *storage.change_on_read.lock().expect("lock") = Some((
            "events/demo/a.json".into(),
            "events/demo/b.json".into(),
            "\"b2\"",
        ));
        let changed = mirror.sync().await.expect("listed");
        assert!(changed.is_empty(), "{changed:?}");
        assert_eq!(local("b.json"), None);

        // The next poll reads one consistent set.
        let changed = mirror.sync().await.expect("listed");
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["demo"]);
        assert_eq!(local("b.json").as_deref(), Some("\"b2\""));

        // One object changes: only it is read again.
        storage.reads.lock().expect("lock").clear();
        storage
            .put(
                &StorePath::from("events/demo/a.json"),
                bytes::Bytes::from_static(b"\"a2\"").into(),
            )
            .await
            .expect("put");
        mirror.sync().await.expect("listed");
        assert_eq!(*storage.reads.lock().expect("lock"), ["events/demo/a.json"]);
        assert_eq!(local("a.json").as_deref(), Some("\"a2\""));
        assert_eq!(local("b.json").as_deref(), Some("\"b2\""));

        // A publish writes every object again: the same bytes (same ETag and size, a new
        // time) are not read again, only the one that changed.
        storage.reads.lock().expect("lock").clear();
        for (key, body) in [("a.json", "\"a2\""), ("b.json", "\"b3\"")] {
            let location = StorePath::parse(format!("events/demo/{key}")).expect("a key");
            let body = bytes::Bytes::from_static(body.as_bytes());
            storage.put(&location, body.into()).await.expect("put");
        }
        let changed = mirror.sync().await.expect("listed");
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["demo"]);
        assert_eq!(*storage.reads.lock().expect("lock"), ["events/demo/b.json"]);
        assert_eq!(local("b.json").as_deref(), Some("\"b3\""));
    }

    /// A stray object put beside a bundle with a manifest makes it incomplete (said in
    /// `/status`); once it is removed, storage holds what was swapped in again, and nothing is
    /// wrong any more. The trouble used to stay until the next publish.
    #[tokio::test]
    async fn a_trouble_goes_when_storage_holds_the_bundle_swapped_in_again() {
        let storage = storage_with(&[]).await;
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("pulled");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("bundle.toml"), "tokens = [\"t\"]\n").expect("write");
        std::fs::write(dir.join("event.json"), "\"e\"").expect("write");
        let mut mirror = mirror_of(&storage, "s3://bucket/events", &tmp.path().join("mirror"));
        let source = Source::parse(Path::new("s3://bucket/events"))
            .expect("s3")
            .expect("valid");
        let target =
            Target::over(storage.clone(), &source, "demo", Duration::from_secs(5)).expect("a name");
        target.publish(&dir, false).await.expect("published");
        let changed = mirror.sync().await.expect("listed");
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["demo"]);

        let stray = StorePath::from("events/demo/stray.json");
        let body = bytes::Bytes::from_static(b"{}");
        storage.put(&stray, body.into()).await.expect("put");
        assert!(mirror.sync().await.expect("listed").is_empty());
        let (state, why) = mirror.troubles.get("demo").expect("a trouble");
        assert_eq!(
            (*state, why.as_str()),
            (
                "incomplete",
                "not complete by its manifest: not in the manifest: stray.json"
            )
        );

        storage.delete(&stray).await.expect("delete");
        assert!(mirror.sync().await.expect("listed").is_empty());
        assert!(mirror.troubles.is_empty(), "{:?}", mirror.troubles);
    }

    /// An object that cannot be read fails its bundle, said in `/status` with why, the copy
    /// swapped in before kept; once it reads, the bundle is taken and nothing is wrong.
    #[tokio::test]
    async fn an_object_that_cannot_be_read_fails_its_bundle_until_it_can() {
        let storage = storage_with(&[
            ("events/demo/bundle.toml", "tokens = [\"t\"]\n"),
            ("events/demo/event.json", "\"e1\""),
        ])
        .await;
        let tmp = tempfile::tempdir().expect("tmp");
        let mut mirror = mirror_of(&storage, "s3://bucket/events", &tmp.path().join("mirror"));
        assert_eq!(mirror.sync().await.expect("listed").len(), 1);
        let event = StorePath::from("events/demo/event.json");
        let body = bytes::Bytes::from_static(b"\"e2\"");
        storage.put(&event, body.into()).await.expect("put");
        storage
            .refused
            .lock()
            .expect("lock")
            .insert(event.to_string());

        assert!(mirror.sync().await.expect("listed").is_empty());
        let (state, why) = mirror.troubles.get("demo").expect("a trouble");
        assert_eq!(*state, "failing");
        assert!(
            why.starts_with("cannot read events/demo/event.json: "),
            "{why}"
        );
        assert!(why.contains("access denied"), "{why}");
        assert_eq!(mirror.keeps("demo"), "the last good copy keeps serving");
        let local = tmp.path().join("mirror/demo/event.json");
        assert_eq!(
            std::fs::read_to_string(&local).ok().as_deref(),
            Some("\"e1\"")
        );

        storage.refused.lock().expect("lock").clear();
        assert_eq!(mirror.sync().await.expect("listed").len(), 1);
        assert!(mirror.troubles.is_empty(), "{:?}", mirror.troubles);
        assert_eq!(
            std::fs::read_to_string(&local).ok().as_deref(),
            Some("\"e2\"")
        );
        assert_eq!(mirror.keeps("other"), "not served until it can be");
    }

    /// An object whose name is not ASCII (or holds a space) is asked for by the name it is
    /// listed with, not that name percent-encoded (which names no object).
    #[tokio::test]
    async fn objects_named_beyond_ascii_are_read_by_their_own_names() {
        let storage = storage_with(&[
            ("events/demo/bundle.toml", "tokens = [\"t\"]\n"),
            ("events/demo/payment_details/Pé 1.json", "\"p\""),
        ])
        .await;
        let tmp = tempfile::tempdir().expect("tmp");
        let mut mirror = mirror_of(&storage, "s3://bucket/events", &tmp.path().join("mirror"));

        let changed = mirror.sync().await.expect("listed");

        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["demo"]);
        let copied = tmp.path().join("mirror/demo/payment_details/Pé 1.json");
        assert_eq!(
            std::fs::read_to_string(copied).ok().as_deref(),
            Some("\"p\"")
        );
    }

    /// A first publish cut short is never served; a complete one is, with every file the
    /// loader reads (a payment reference starting with `_` among them), its tokens readable by
    /// the owner only, and no manifest in the local folder.
    #[tokio::test]
    async fn a_publish_is_served_only_once_complete_even_the_first() {
        let storage = storage_with(&[]).await;
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("pulled");
        std::fs::create_dir_all(dir.join("payment_details")).expect("mkdir");
        for (file, body) in [
            ("bundle.toml", "tokens = [\"t\"]\n"),
            ("event.json", "\"e\""),
            ("payments.json", "\"p\""),
            ("payment_details/_R1.json", "\"r\""),
        ] {
            std::fs::write(dir.join(file), body).expect("write");
        }
        let source = Source::parse(Path::new("s3://bucket/events"))
            .expect("s3")
            .expect("valid");
        let timeout = Duration::from_secs(5);
        let mut mirror = Mirror::over(
            source.clone(),
            storage.clone(),
            tmp.path().join("mirror"),
            timeout,
        )
        .expect("mirror");

        let target = Target::over(storage.clone(), &source, "demo", timeout).expect("a name");
        *storage.puts_left.lock().expect("lock") = Some(3);
        target
            .publish(&dir, false)
            .await
            .expect_err("the connection dropped");
        let changed = mirror.sync().await.expect("listed");
        assert!(changed.is_empty(), "served half-published: {changed:?}");
        // Told to /status: why the bundle is not there.
        let (state, why) = mirror.troubles.get("demo").expect("a trouble");
        assert_eq!(*state, "incomplete");
        assert!(
            why.starts_with("not complete by its manifest: missing "),
            "{why}"
        );

        *storage.puts_left.lock().expect("lock") = None;
        let files = target.publish(&dir, false).await.expect("published");
        assert_eq!(files, 4);
        let changed = mirror.sync().await.expect("listed");
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["demo"]);
        assert!(mirror.troubles.is_empty(), "{:?}", mirror.troubles);
        let local = tmp.path().join("mirror/demo");
        assert_eq!(
            std::fs::read_to_string(local.join("payment_details/_R1.json")).ok(),
            Some("\"r\"".to_string())
        );
        assert!(!local.join(MANIFEST).exists());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(local.join("bundle.toml"))
                .expect("bundle.toml")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[tokio::test]
    async fn a_prefix_that_is_a_bundle_is_refused_saying_so() {
        let storage = storage_with(&[
            ("events/demo/bundle.toml", "tokens = [\"t\"]\n"),
            ("events/demo/payment_details/R1.json", "{}"),
        ])
        .await;
        let tmp = tempfile::tempdir().expect("tmp");
        let mirror_of = |prefix: &str| mirror_of(&storage, prefix, &tmp.path().join("mirror"));
        let refused = mirror_of("s3://bucket/events/demo")
            .sync()
            .await
            .expect_err("a bundle");
        assert_eq!(
            refused.to_string(),
            "s3://bucket/events/demo is a bundle itself (it holds bundle.toml): give the prefix that holds its bundles, one level up"
        );
        let changed = mirror_of("s3://bucket/events")
            .sync()
            .await
            .expect("listed");
        assert_eq!(changed.into_iter().collect::<Vec<_>>(), ["demo"]);
    }

    #[test]
    fn only_plain_names_become_paths() {
        for name in ["event.json", "demo"] {
            assert!(bundle_name(name) && bundle_file_segment(name), "{name}");
        }
        for name in ["..", ".", "", "a/b", "a\\b", "a\0b", ".event.json.swp"] {
            assert!(!bundle_name(name) && !bundle_file_segment(name), "{name:?}");
        }
        // A staging folder is no bundle; a payment reference may start with `_`.
        assert!(!bundle_name("_staging"));
        assert!(bundle_file_segment("_R1.json"));
    }

    #[test]
    fn a_prefix_holding_other_bundles_or_objects_is_not_replaced_unless_forced() {
        let source = Source::parse(Path::new("s3://b/events"))
            .expect("a store")
            .expect("parsed");
        let held = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        for fine in [
            held(&[]),
            held(&["bundle.toml", "event.json", "payment_details/R1.json"]),
            held(&[MANIFEST, "event.json"]),
        ] {
            assert_eq!(refuse(&source, "demo", &fine, false), Ok(()), "{fine:?}");
        }
        let other = held(&[
            "demo/bundle.toml",
            "demo/event.json",
            "summit/bundle.toml",
            "notes.txt",
            "old/event.json",
        ]);
        let said = refuse(&source, "all", &other, false).expect_err("refused");
        assert!(
            said.contains("s3://b/events/all holds 2 bundles (demo, summit) and 2 other entries (notes.txt, old)")
                && said.contains("--into s3://b/events/all/NAME"),
            "{said}"
        );
        assert_eq!(refuse(&source, "all", &other, true), Ok(()));
    }
}
