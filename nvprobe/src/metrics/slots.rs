//! Who holds the metrics server's connections: at most `per_peer` per
//! address and `total` in all, plus a `reserve` that answers only /healthz.
//!
//! A connection that has not finished sending its request head gives its
//! place up to a newer one (its own peer's oldest when that peer is at its
//! bound, else the pool's oldest): connections that send nothing cannot
//! shut a scrape out, and a peer that opens many only closes its own.
//! A connection whose request has arrived keeps its place to the end of its
//! exchange (bounded in time by the server).

use std::{
    collections::{BTreeMap, HashMap},
    net::IpAddr,
};

use tokio::task::AbortHandle;

/// The bounds of the metrics server.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections served at once, all peers together.
    pub total: usize,
    /// Connections one address holds at once, in either pool.
    pub per_peer: usize,
    /// Connections beyond `total` that answer only /healthz (and refuse
    /// anything else with 503): a probe gets through while every scrape slot
    /// is taken by an exchange under way.
    pub reserve: usize,
}

impl Limits {
    /// What `--metrics` uses.
    pub const DEFAULT: Limits = Limits {
        total: 16,
        per_peer: 4,
        reserve: 4,
    };
}

/// Which pool a connection was given a place in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Pool {
    /// Any path.
    Main,
    /// /healthz only.
    Reserve,
}

#[derive(Debug)]
struct Conn {
    peer: IpAddr,
    pool: Pool,
    /// Still sending its request head: it may be given up for a newer one.
    reading: bool,
    /// Ends the connection's task (set once it is spawned).
    abort: Option<AbortHandle>,
}

/// What [`Slots::admit`] decided.
#[derive(Debug)]
pub(super) struct Admission {
    /// The place given (id, pool), or None: refused.
    pub place: Option<(u64, Pool)>,
    /// Connections given up to make room (id, and the handle that ends
    /// its task, to be aborted).
    pub evicted: Vec<(u64, Option<AbortHandle>)>,
}

#[derive(Debug)]
pub(super) struct Slots {
    limits: Limits,
    next: u64,
    /// By id, which is the order of admission: the first reading one is the
    /// oldest.
    conns: BTreeMap<u64, Conn>,
    per_peer: HashMap<IpAddr, usize>,
    main: usize,
    reserve: usize,
}

impl Slots {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            next: 0,
            conns: BTreeMap::new(),
            per_peer: HashMap::new(),
            main: 0,
            reserve: 0,
        }
    }

    /// A place for a new connection from `peer`, giving up older connections
    /// still reading their request where the bounds need it.
    pub fn admit(&mut self, peer: IpAddr) -> Admission {
        let mut evicted = Vec::new();
        if self.per_peer.get(&peer).copied().unwrap_or(0) >= self.limits.per_peer {
            match self.oldest_reading(|c| c.peer == peer) {
                Some(id) => evicted.push((id, self.remove(id).flatten())),
                None => {
                    return Admission {
                        place: None,
                        evicted,
                    };
                }
            }
        }
        let pool = if self.main < self.limits.total {
            Some(Pool::Main)
        } else if let Some(id) = self.oldest_reading(|c| c.pool == Pool::Main) {
            evicted.push((id, self.remove(id).flatten()));
            Some(Pool::Main)
        } else if self.reserve < self.limits.reserve {
            Some(Pool::Reserve)
        } else if let Some(id) = self.oldest_reading(|c| c.pool == Pool::Reserve) {
            evicted.push((id, self.remove(id).flatten()));
            Some(Pool::Reserve)
        } else {
            None
        };
        let Some(pool) = pool else {
            return Admission {
                place: None,
                evicted,
            };
        };
        let id = self.next;
        self.next += 1;
        self.conns.insert(
            id,
            Conn {
                peer,
                pool,
                reading: true,
                abort: None,
            },
        );
        *self.per_peer.entry(peer).or_default() += 1;
        *self.count(pool) += 1;
        Admission {
            place: Some((id, pool)),
            evicted,
        }
    }

    /// The handle that ends connection `id`'s task (a no-op when it is gone).
    pub fn set_abort(&mut self, id: u64, abort: AbortHandle) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.abort = Some(abort);
        }
    }

    /// Connection `id` sent its whole request: it keeps its place now.
    pub fn head_read(&mut self, id: u64) {
        if let Some(c) = self.conns.get_mut(&id) {
            c.reading = false;
        }
    }

    /// Connection `id` ended (a no-op when it was given up already).
    pub fn release(&mut self, id: u64) {
        // Its own task is ending: nothing to abort.
        let _ = self.remove(id);
    }

    /// Connections held now: (main, reserve).
    #[cfg(test)]
    pub fn held(&self) -> (usize, usize) {
        (self.main, self.reserve)
    }

    fn oldest_reading(&self, pick: impl Fn(&Conn) -> bool) -> Option<u64> {
        self.conns
            .iter()
            .find(|(_, c)| c.reading && pick(c))
            .map(|(&id, _)| id)
    }

    fn count(&mut self, pool: Pool) -> &mut usize {
        match pool {
            Pool::Main => &mut self.main,
            Pool::Reserve => &mut self.reserve,
        }
    }

    /// Forget connection `id`: None when it was not held, else its abort
    /// handle if it had one.
    fn remove(&mut self, id: u64) -> Option<Option<AbortHandle>> {
        let c = self.conns.remove(&id)?;
        if let Some(n) = self.per_peer.get_mut(&c.peer) {
            *n -= 1;
            if *n == 0 {
                self.per_peer.remove(&c.peer);
            }
        }
        *self.count(c.pool) -= 1;
        Some(c.abort)
    }
}
