//! The open-file limit the TCP table needs: raised at start from the soft to
//! the hard limit, as Go's runtime does for CoreDNS since Go 1.19, with a
//! warning when even the hard limit is short of `-tcp-max-connections`.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// Files kept open besides the TCP clients (sockets, etcd, epoll, the
/// query log), with room to spare.
const OTHER_FILES: u64 = 256;

/// Raises the soft open-file limit to the hard one, and warns when the
/// result leaves no room for `max_connections` clients.
pub(super) fn raise_for(max_connections: usize) {
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    let limit = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    if let Some(needed) = short_of(limit, max_connections) {
        tracing::warn!(
            limit,
            needed,
            "the open-file limit is lower than -tcp-max-connections needs: past it the kernel refuses new TCP clients before the table can make room; raise the limit (ulimit -n, LimitNOFILE=) or lower -tcp-max-connections"
        );
    }
}

/// The limit needed, when `limit` is short of it.
fn short_of(limit: u64, max_connections: usize) -> Option<u64> {
    let needed = (max_connections as u64).saturating_add(OTHER_FILES);
    (limit < needed).then_some(needed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_must_hold_every_client_and_the_other_files() {
        assert_eq!(short_of(1_024, 1_000), Some(1_256));
        assert_eq!(short_of(1_256, 1_000), None);
        assert_eq!(short_of(u64::MAX, usize::MAX), None);
    }

    #[test]
    fn the_soft_limit_is_raised_to_the_hard_one() {
        let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        setrlimit(Resource::RLIMIT_NOFILE, hard - 1, hard).unwrap();
        raise_for(1);
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(soft, hard);
    }
}
