//! Found by the audit of e100eb9 (issue "A lost tick, leaked passwords, a
//! token that is not one, and the silent default server"): each test failed
//! on that commit.

use std::time::Duration;

use crate::harness::{Fleet, Redlock, lock_key, send_signal, unique_key};

/// A contender frozen during its round for longer than its node timeout
/// (a VM pause, a starved host) resumes with the servers' grants in its
/// socket buffers: it must read them and hold the lock, not withdraw them
/// as timed out while the other hosts, which saw it hold a quorum, skip.
#[test]
fn a_winner_frozen_past_its_node_timeout_keeps_the_grants_that_arrived() {
    let fleet = Fleet::start(3);
    let key = unique_key("frozen-winner");
    // The servers know the acquire script already, as they do after the
    // first run (a NOSCRIPT answer would need a second round trip).
    Redlock::on(&fleet).args(["run", "-k", &unique_key("warm-up"), "--", "true"]).run().expect(0);
    // The servers hold the attempt's writes for a second: the answers
    // arrive while redlock is frozen, after its node timeout.
    for s in &fleet.servers {
        let _: redis::Value = s.cmd(&["CLIENT", "PAUSE", "1000", "WRITE"]);
    }
    let contender = Redlock::on(&fleet)
        .args(["acquire", "-n", "--ttl", "30s", "--node-timeout", "1s", "-k", &key])
        .spawn();
    std::thread::sleep(Duration::from_millis(300));
    send_signal(contender.pid(), libc::SIGSTOP);
    std::thread::sleep(Duration::from_millis(2000));
    send_signal(contender.pid(), libc::SIGCONT);
    let out = contender.wait();
    out.expect(0);
    let token = out.line().to_owned();
    assert_eq!(fleet.values(&lock_key(&key)), vec![Some(token); 3], "the grants were withdrawn");
}
