//! Where a lock's keys live on the servers ([`KeyLayout`]), and the
//! channel its releases are announced on.

/// Where the keys of a lock live on the servers. Every key redlock writes
/// expires: the lock with its TTL (renewed while held), the fencing counter
/// [`crate::fence::lifetime`] after the last acquisition that wrote it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyLayout {
    /// redlock's own namespace (the default): the lock `KEY` is
    /// `redlock:{KEY}` and its counter `redlock:{KEY}:fence`, so redlock
    /// never reads, extends or deletes a key it did not write. The braces
    /// are a Cluster hash tag: every key of one lock is in one slot. `%`,
    /// `{` and `}` in KEY are written `%25`, `%7B` and `%7D`, so that the
    /// tag is always the whole key and two keys never share a name.
    #[default]
    Native,
    /// The key as given (`--raw-key`), for other Redlock clients (redsync,
    /// node-redlock, `redis-cli SET KEY VALUE NX PX`): the lock is `KEY`
    /// itself, its counter `redlock:{TAG}:fence:KEY` with TAG the key's own
    /// Cluster hash tag, or the key when it has none (the counter is then in
    /// the key's slot unless the key holds a `}` without a valid tag).
    Raw,
}

impl KeyLayout {
    /// The server-side name of the lock `key`.
    pub fn lock_key(self, key: &str) -> String {
        match self {
            KeyLayout::Native => format!("redlock:{{{}}}", escape_tag(key)),
            KeyLayout::Raw => key.to_owned(),
        }
    }

    /// The server-side name of the fencing counter of the lock `key`.
    pub fn fence_key(self, key: &str) -> String {
        self.companion(key, "fence")
    }

    /// The server-side name of the run history of the lock `key` (a list,
    /// newest first; [`crate::history`]).
    pub fn history_key(self, key: &str) -> String {
        self.companion(key, "history")
    }

    /// The server-side name of the grant record of the lock `key` (a hash;
    /// [`super::record`]).
    pub fn record_key(self, key: &str) -> String {
        self.companion(key, "last")
    }

    /// The server-side name of the skip counter of the lock `key` (a hash;
    /// [`crate::history`]).
    pub fn skips_key(self, key: &str) -> String {
        self.companion(key, "skips")
    }

    /// A key that goes with the lock `key`, in its Cluster hash slot:
    /// `redlock:{KEY}:WHAT`, or `redlock:{TAG}:WHAT:KEY` for a raw key.
    fn companion(self, key: &str, what: &str) -> String {
        match self {
            KeyLayout::Native => format!("redlock:{{{}}}:{what}", escape_tag(key)),
            KeyLayout::Raw => {
                format!("redlock:{{{}}}:{what}:{key}", cluster_tag(key).unwrap_or(key))
            }
        }
    }
}

impl KeyLayout {
    /// The server-side names of the wait queue of `key` ([`crate::queue`]):
    /// its order and its deadlines, in the lock's slot.
    pub fn queue_keys(self, key: &str) -> [String; 2] {
        [self.companion(key, "queue"), self.companion(key, "queue-deadlines")]
    }
}

impl KeyLayout {
    /// The server-side name of place `slot` (1-based) of the `--limit`
    /// lock `key` ([`crate::slots`]): place 1 is the lock key itself, so
    /// `--limit 1` is the ordinary lock; place S > 1 is
    /// `redlock:{KEY}:slot:S` (raw: `redlock:{TAG}:slot:S:KEY`), in the
    /// lock's Cluster hash slot like its other companions. With the key as
    /// given, other Redlock clients exclude and are excluded by place 1
    /// only: they count as one more holder, never as N.
    pub fn slot_key(self, key: &str, slot: u32) -> String {
        if slot <= 1 { self.lock_key(key) } else { self.companion(key, &format!("slot:{slot}")) }
    }

    /// The server-side name of the `--shared` holders of `key`
    /// (`redlock:{KEY}:readers`; [`crate::shared`]).
    pub fn readers_key(self, key: &str) -> String {
        self.companion(key, "readers")
    }

    /// The server-side name of the place that `held` holds (or tries):
    /// the place its mode names ([`crate::token::Mode::slot`]; place 1
    /// for any value that is not a place's token).
    pub fn held_key(self, key: &str, held: super::Held<'_>) -> String {
        self.slot_key(key, held.mode.slot())
    }
}

impl KeyLayout {
    /// Whether every key of the lock `key` is in one Cluster hash slot, as
    /// a cluster needs (a script's keys must share a slot). Always in
    /// redlock's own namespace; with the key as given, all but a few keys:
    /// those with a `}` but no valid hash tag of their own (`a}b`, `{}x`),
    /// whose companions' tag (`redlock:{a}b}:fence:a}b`) hashes a part of
    /// the key. Those are refused through a cluster rather than given
    /// other companion names: the names are shared by every redlock that
    /// locks the key, and two names for one fence counter would let
    /// fencing numbers go backwards between hosts.
    pub fn one_slot(self, key: &str) -> bool {
        use crate::server::cluster::key_slot;
        let slot = key_slot(self.lock_key(key).as_bytes());
        key_slot(self.fence_key(key).as_bytes()) == slot
    }
}

/// `key` with `%`, `{` and `}` percent-encoded: usable inside a hash tag.
fn escape_tag(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for c in key.chars() {
        match c {
            '%' => out.push_str("%25"),
            '{' => out.push_str("%7B"),
            '}' => out.push_str("%7D"),
            c => out.push(c),
        }
    }
    out
}

/// The part of `key` that Redis Cluster hashes when the key has a hash tag:
/// between the first `{` and the next `}`, when not empty.
fn cluster_tag(key: &str) -> Option<&str> {
    let open = key.find('{')?;
    let rest = &key[open + 1..];
    let close = rest.find('}')?;
    (close > 0).then(|| &rest[..close])
}

/// The pub/sub channel on which releases of `key` are announced, so that
/// waiters retry at once instead of at their next backoff step.
pub fn release_channel(key: &str) -> String {
    format!("redlock:released:{key}")
}

/// How many leading characters of a waiter's queue entry name the channel
/// on which a release that names it first is also announced
/// ([`wake_channel`]); every entry of one process shares them
/// ([`crate::queue::entry`]).
pub const WAKE_TAG: usize = 8;

/// The channel on which a release of `key` that names `member` first in the
/// queue is announced, besides [`release_channel`]: the release channel, a
/// newline, and the first [`WAKE_TAG`] characters of the member (as
/// `scripts/announce.lua` builds it). An ordered waiter listens
/// here only, so a release wakes the one waiter whose turn it is, not all
/// of them (8 waiters on 5 servers would otherwise hear 24 messages per
/// release). Another process's tag that happens to be equal costs that
/// process a wake-up, never a missed one.
pub fn wake_channel(key: &str, member: &str) -> String {
    format!("{}\n{}", release_channel(key), member.get(..WAKE_TAG).unwrap_or(member))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_channel_is_the_release_channel_and_the_member_tag() {
        let member = "0123456789abcdef0123456789abcdef.1.2.h";
        assert_eq!(wake_channel("job", member), "redlock:released:job\n01234567");
    }

    #[test]
    fn native_keys_share_one_hash_tag_and_never_collide() {
        let native = KeyLayout::Native;
        assert_eq!(native.lock_key("job"), "redlock:{job}");
        assert_eq!(native.fence_key("job"), "redlock:{job}:fence");
        for key in ["a}b", "}", "{x}", "a{b}c", "%7D", "100%", "{}"] {
            let (lock, counter) = (native.lock_key(key), native.fence_key(key));
            let tag = cluster_tag(&lock);
            assert!(tag.is_some_and(|t| !t.contains(['{', '}'])), "{key:?}: {lock}");
            assert_eq!(tag, cluster_tag(&counter), "{key:?}: one slot");
            assert_eq!(tag, cluster_tag(&native.history_key(key)), "{key:?}: history in the slot");
            assert_eq!(tag, cluster_tag(&native.skips_key(key)), "{key:?}: skips in the slot");
        }
        assert_ne!(native.lock_key("a}b"), native.lock_key("a%7Db"));
        assert_ne!(native.lock_key("a%7Db"), native.lock_key("a%257Db"));
    }

    #[test]
    fn raw_keys_are_as_given_with_the_counter_in_their_slot() {
        let raw = KeyLayout::Raw;
        assert_eq!(raw.lock_key("job"), "job");
        assert_eq!(raw.fence_key("job"), "redlock:{job}:fence:job");
        assert_eq!(raw.fence_key("{user1}.job"), "redlock:{user1}:fence:{user1}.job");
        assert_eq!(raw.history_key("{user1}.job"), "redlock:{user1}:history:{user1}.job");
        assert_eq!(raw.skips_key("job"), "redlock:{job}:skips:job");
        assert_eq!(cluster_tag("{user1}.job"), Some("user1"));
        assert_eq!(cluster_tag("{}.job"), None);
        assert_ne!(raw.fence_key("job"), KeyLayout::Native.fence_key("job"));
    }

    #[test]
    fn one_slot_is_what_a_cluster_hashes() {
        use crate::server::cluster::key_slot;
        for key in ["job", "{user1}.job", "x{y", "a}b", "{}x", "a{}{b}", "}{", "%7D{"] {
            for layout in [KeyLayout::Native, KeyLayout::Raw] {
                let slot = key_slot(layout.lock_key(key).as_bytes());
                let all = [
                    layout.fence_key(key),
                    layout.history_key(key),
                    layout.skips_key(key),
                    layout.readers_key(key),
                    layout.slot_key(key, 3),
                    layout.queue_keys(key)[1].clone(),
                ]
                .iter()
                .all(|k| key_slot(k.as_bytes()) == slot);
                assert_eq!(layout.one_slot(key), all, "{layout:?} {key:?}");
            }
            assert!(KeyLayout::Native.one_slot(key), "{key:?}");
        }
        assert!(!KeyLayout::Raw.one_slot("a}b"));
        assert!(!KeyLayout::Raw.one_slot("{}x"));
        assert!(KeyLayout::Raw.one_slot("x{y"));
    }
}
