//! Per-client-address connection counting (`--max-connections-per-ip`): one client cannot take
//! every connection slot (`--max-connections`) and leave the others waiting. A connection over
//! the limit is closed as soon as it is accepted, before a byte is read.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Open connections by client address.
#[derive(Debug)]
pub(crate) struct PerIp {
    limit: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One counted connection; uncounted when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    ip: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerIp {
    pub(crate) fn new(limit: usize) -> PerIp {
        PerIp {
            limit: limit.max(1),
            open: Arc::default(),
        }
    }

    /// Counts a connection from `ip`, or `None` when that address holds `limit` already.
    pub(crate) fn claim(&self, ip: IpAddr) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let n = open.entry(ip).or_insert(0);
        if *n >= self.limit {
            return None;
        }
        *n += 1;
        Some(Slot {
            ip,
            open: Arc::clone(&self.open),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = open.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_gets_at_most_limit_slots_and_gets_them_back() {
        let per_ip = PerIp::new(2);
        let a: IpAddr = [127, 0, 0, 2].into();
        let b: IpAddr = [127, 0, 0, 1].into();
        let first = per_ip.claim(a).expect("first");
        let _second = per_ip.claim(a).expect("second");
        assert!(per_ip.claim(a).is_none(), "a third from the same address");
        assert!(per_ip.claim(b).is_some(), "another address is not affected");
        drop(first);
        assert!(
            per_ip.claim(a).is_some(),
            "a closed connection frees its slot"
        );
    }
}
