//! What can go wrong talking to the v2 keys API, and the etcd error codes
//! callers act on.

/// etcd's "Key not found".
pub const KEY_NOT_FOUND: u32 = 100;
/// etcd's "Key already exists" (a create of a key that exists).
pub const KEY_EXISTS: u32 = 105;
/// etcd's "Not a directory" (a path below a key).
pub const NOT_A_DIRECTORY: u32 = 104;
/// etcd's "Directory not empty" (a non-recursive directory delete).
pub const DIRECTORY_NOT_EMPTY: u32 = 108;
/// etcd's "The event in requested index is outdated and cleared": a watch
/// asked for an index older than the 1000 events etcd keeps.
pub const EVENT_INDEX_CLEARED: u32 = 401;

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// etcd answered with one of its error codes.
    #[error("etcd error {code}: {message} ({cause}) [index {index}]")]
    Etcd {
        /// The `errorCode`, e.g. [`KEY_NOT_FOUND`].
        code: u32,
        /// The `message`.
        message: String,
        /// The `cause` (usually the key).
        cause: String,
        /// etcd's index at the time.
        index: u64,
    },
    /// The server answered, but not with the v2 keys API: etcd ≥ 3.4 started
    /// without `--enable-v2`, or not an etcd at all.
    #[error("{endpoint} does not serve the etcd v2 keys API (HTTP {status} for /v2/keys); start etcd with --enable-v2=true, or use the v3 API")]
    NoV2Api {
        /// The endpoint asked.
        endpoint: String,
        /// The HTTP status it gave.
        status: u16,
    },
    /// No endpoint could be reached.
    #[error("cannot reach etcd: {0}")]
    Transport(String),
    /// The request was sent but not answered in time.
    #[error("etcd did not answer in time: {0}")]
    Timeout(String),
    /// An unexpected HTTP status without an etcd error body (e.g. 401 from
    /// basic auth).
    #[error("etcd answered HTTP {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The body, shortened.
        body: String,
    },
    /// A body that is not the JSON etcd sends.
    #[error("unreadable answer from etcd: {0}")]
    Decode(String),
    /// Bad client settings (a certificate that cannot be read, ...).
    #[error("{0}")]
    Config(String),
}

impl Error {
    /// The etcd error code, if etcd gave one.
    pub fn code(&self) -> Option<u32> {
        match self {
            Error::Etcd { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// "Key not found" (100).
    pub fn is_key_not_found(&self) -> bool {
        self.code() == Some(KEY_NOT_FOUND)
    }

    /// A watch index older than etcd's event history (401).
    pub fn is_event_index_cleared(&self) -> bool {
        self.code() == Some(EVENT_INDEX_CLEARED)
    }

    /// Whether retrying can never help (missing API, bad settings).
    pub fn is_permanent(&self) -> bool {
        matches!(self, Error::NoV2Api { .. } | Error::Config(_))
    }
}
