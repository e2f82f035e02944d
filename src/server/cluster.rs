//! Redis Cluster hash slots: which of the 16,384 slots a key lives in.
//!
//! This is the first, self-contained part of "a cluster is one member of
//! the quorum" (issue 14, item 4). What exists: [`key_slot`], the slot
//! function Redis Cluster itself uses, checked against `CLUSTER KEYSLOT`.
//! What does not exist yet: the `redis+cluster://` URL kind and routing by
//! slot in [`crate::server`]; until then a cluster node given as a plain
//! server is refused at once ([`crate::server::Failure::from_redis`]).
//!
//! # Why one slot per lock
//! Every key of one lock (the lock key, fence, queue, readers, slots,
//! history) carries the same hash tag (`redlock:{KEY}...`, see
//! [`crate::lock::KeyLayout`]), so `key_slot(layout.lock_key(key))` names
//! the one node that must run each of the lock's scripts.
//!
//! # The safety argument routing will have to keep
//! (Written down here so that the implementation is held to it.)
//! - A cluster counts as ONE member of the quorum, however many masters it
//!   has: the vote is the master that owns the lock's slot.
//! - A failover inside the cluster can lose a fresh lock, because Redis
//!   replicates asynchronously: the promoted replica may not have the key.
//!   That is the same cost as a Sentinel failover ([`crate::server::sentinel`]),
//!   and the same as a plain server restarting without persistence.
//! - A master cut off from the rest of the cluster keeps accepting writes
//!   until `cluster-node-timeout` passes, while another node is promoted
//!   for its slots. That is a second vote of the same member only if
//!   redlock talks to two masters for one slot within one lock's life; a
//!   `MOVED`/`ASK`/`CLUSTERDOWN`/`TRYAGAIN` reply must therefore drop the
//!   slot map and count as a broken connection (never a vote), and a
//!   connection must stay bound to the node it was made for, with the slot
//!   owner re-confirmed at most once per node timeout, as the Sentinel
//!   target re-checks `ROLE`.

/// The number of hash slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// The hash slot of `key`, as Redis Cluster computes it: CRC16 (XMODEM) of
/// the hash tag (the part between the first `{` and the next `}`, when that
/// part is not empty) or else of the whole key, modulo 16,384.
/// Source: the Redis Cluster specification, "Hash tags".
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// The part of `key` that is hashed.
fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// CRC16/XMODEM: polynomial 0x1021, initial value 0, no reflection.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_is_xmodem() {
        // The check value of CRC-16/XMODEM.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slots_match_cluster_keyslot() {
        // Each expected value is what `CLUSTER KEYSLOT` answered on Redis 7.
        for (key, slot) in [
            ("foo", 12182),
            ("bar", 5061),
            ("", 0),
            ("{user1000}.following", 3443),
            ("{}x", 10595),
            ("a{}{b}", 15033),
            ("redlock:{nightly}", 4416),
            ("redlock:{nightly}:fence", 4416),
            ("x{y", 2740),
            ("{{a}}", 10276),
            ("123456789", 12739),
        ] {
            assert_eq!(key_slot(key.as_bytes()), slot, "{key:?}");
        }
    }
}
