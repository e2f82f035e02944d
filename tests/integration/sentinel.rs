//! Sentinel-managed servers, with real processes: a
//! master, a replica and three Sentinels ([`SentinelGroup`]). The group is
//! one member of the quorum; redlock finds its master through the
//! Sentinels, follows a failover, and a `run` whose lock is on the group
//! and two plain servers never runs its command unguarded across one.

use std::time::{Duration, Instant};

use crate::harness::proxy::{Mode, Proxy};
use crate::harness::sentinel::{SERVICE, Sentinel, SentinelGroup};
use crate::harness::{
    Fleet, RedisServer, Redlock, lock_key, pid_in, process_alive, unique_key, wait_for_file,
};

/// The token `acquire` printed, once it exits 0.
fn acquire(servers: &str, key: &str, ttl: &str) -> String {
    let out = Redlock::new(servers).args(["acquire", "-n", "--key", key, "--ttl", ttl]).run();
    out.expect(0);
    out.line().to_owned()
}

#[test]
fn acquire_status_run_and_doctor_through_a_sentinel_url() {
    let group = SentinelGroup::start();
    let url = group.url();
    let key = unique_key("sentinel");
    let token = acquire(&url, &key, "30s");
    let master = group.master();
    assert_eq!(master.get(&lock_key(&key)).as_deref(), Some(token.as_str()), "on the master");
    let status = Redlock::new(&url).args(["status", "--key", &key, "--json"]).run();
    status.expect(0);
    let json = status.json();
    assert_eq!(json["quorum"], 1, "the group is one member");
    assert_eq!(json["holder"]["token"], token.as_str());
    let name = json["servers"][0]["server"].as_str().unwrap_or_default().to_owned();
    assert!(name.starts_with(&format!("sentinel:{SERVICE}@127.0.0.1:")), "{name}");
    Redlock::new(&url).args(["release", "--key", &key, "--token", &token]).run().expect(0);
    assert_eq!(master.get(&lock_key(&key)), None);

    let connections =
        || -> Vec<u64> { group.sentinels.iter().map(|s| s.connections_received()).collect() };
    let before = connections();
    let out = Redlock::new(&url)
        .args(["run", "--key", &key, "--ttl", "1s", "--", "sh", "-c", "sleep 1.5; echo ran"])
        .run();
    out.expect(0);
    assert_eq!(out.line(), "ran");
    // The master is confirmed again before each renewal (about 5 here), on
    // one kept connection per Sentinel, not a new one each time (the
    // count includes the test's own INFO).
    for (b, a) in before.iter().zip(connections()) {
        assert!(a - b <= 3, "{} connections to one Sentinel for one run", a - b);
    }

    let doctor = Redlock::new(&url).args(["doctor"]).run();
    assert!(matches!(doctor.code(), 0 | 1), "{}", doctor.stdout);
    let line = format!(
        "sentinel {SERVICE}: 3 of 3 Sentinels answer, agree on master 127.0.0.1:{}",
        master.port
    );
    assert!(doctor.stdout.contains(&line), "{}", doctor.stdout);
    let json = Redlock::new(&url).args(["doctor", "--json"]).run().json();
    assert_eq!(json["sentinels"][0]["master"], format!("127.0.0.1:{}", master.port), "{json}");
    assert_eq!(json["sentinels"][0]["master_role"], "master", "{json}");
}

#[test]
fn a_wrong_service_or_dead_sentinels_are_reported_with_their_cause() {
    let mut group = SentinelGroup::start();
    let key = unique_key("sentinel-bad");
    let wrong = group.url().replace(SERVICE, "no-such-service");
    // Waiting cannot cure a name no Sentinel monitors: 69 at once.
    Redlock::new(&wrong)
        .args(["acquire", "--wait", "10s", "--key", &key])
        .run()
        .expect(69)
        .within(Duration::from_secs(5))
        .stderr_has("no Sentinel monitors the service \"no-such-service\"");
    let doctor = Redlock::new(&wrong).args(["doctor"]).run();
    doctor.expect(69);
    for s in &mut group.sentinels {
        s.stop();
    }
    Redlock::new(&group.url())
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(69)
        .stderr_has("connection refused");
}

#[test]
fn a_failover_during_a_run_keeps_the_lock_or_stops_the_command_and_redlock_follows_it() {
    let group = SentinelGroup::start();
    let plain = Fleet::start(2);
    let servers = format!("{},{}", group.url(), plain.urls());
    let key = unique_key("failover");
    let dir = tempfile::tempdir().unwrap();
    let (pid, token_file) = (dir.path().join("pid"), dir.path().join("token"));
    let script = format!(
        "echo \"$REDLOCK_TOKEN\" > {t}.tmp && mv {t}.tmp {t}; echo $$ > {p}; sleep 8",
        t = token_file.display(),
        p = pid.display()
    );
    // TTL 6s: redlock renews where the Sentinels say the master is, so
    // the key the new master got by replication must last until the first
    // renewal after the Sentinels' switch. Sentinel notices the promotion
    // by polling INFO once a second (0.6-0.9s from FAILOVER to the switch
    // on an idle machine, more under load); with a 2s TTL (renewals every
    // 0.67s) a switch later than ~1.3s after the last replicated write
    // left nothing to renew: a failure of the test, not of redlock. With
    // 6s (renewals every 2s) the Sentinels have ~4s.
    let ttl = Duration::from_secs(6);
    let running = Redlock::new(&servers)
        .args(["-v", "run", "--key", &key, "--ttl", "6s", "-c", &script])
        .spawn();
    let child = pid_in(&pid);
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_owned();
    let old = group.master().port;
    // The command starts once a quorum holds the lock, maybe before the
    // group's vote lands (its master is found through the Sentinels). A
    // failover during a run of a group that holds the lock: wait until the
    // master has it and has replicated it, so that it survives the
    // promotion (a write after it would be lost with the demoted master).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !group.servers.iter().all(|s| s.get(&lock_key(&key)).as_deref() == Some(&*token)) {
        assert!(
            Instant::now() < deadline,
            "the group's servers never both held the lock: {:?}",
            group.servers.iter().map(|s| s.get(&lock_key(&key))).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let _: String = group.sentinels[0].cmd(&["SENTINEL", "FAILOVER", SERVICE]);
    // Never unguarded: while the command runs, a quorum (2 of the 3
    // members) holds its token. The plain servers are enough; the group
    // counts when its current master has it.
    let start = Instant::now();
    let mut new_master_has_it = false;
    let new = loop {
        let held =
            plain.values(&lock_key(&key)).iter().filter(|v| v.as_deref() == Some(&*token)).count();
        assert!(
            !process_alive(child) || held == 2,
            "the command runs but {held} plain server(s) hold its lock"
        );
        let ports: Vec<Option<u16>> = group.sentinels.iter().map(|s| s.master_port()).collect();
        if ports.iter().all(|p| p.is_some_and(|p| p != old)) {
            break ports[0].unwrap();
        }
        assert!(start.elapsed() < Duration::from_secs(30), "no failover: {ports:?}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let switched_after = start.elapsed();
    let new_master = group.servers.iter().find(|s| s.port == new).unwrap();
    // Renewals (every TTL/3) reach the new master through the Sentinels:
    // its PTTL goes up. (The demoted master replicates nothing to it any
    // more, so only redlock's extend can raise it.) Watched while the
    // command runs, up to two TTLs: several renewals.
    let deadline = Instant::now() + 2 * ttl;
    let mut last_pttl = i64::MAX - 1000;
    while process_alive(child) && Instant::now() < deadline {
        let pttl = new_master.pttl(&lock_key(&key));
        if pttl > last_pttl + 100 && new_master.get(&lock_key(&key)).as_deref() == Some(&*token) {
            new_master_has_it = true;
            break;
        }
        last_pttl = pttl;
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = running.wait();
    eprintln!(
        "failover run: exit {}, new master renewed: {new_master_has_it}\n{}",
        out.code(),
        out.stderr
    );
    match out.code() {
        0 => assert!(
            new_master_has_it,
            "the run kept its lock, but never renewed it on the new master (the Sentinels \
             switched {switched_after:?} after FAILOVER; its key: {:?}, PTTL {})",
            new_master.get(&lock_key(&key)),
            new_master.pttl(&lock_key(&key)),
        ),
        70 => assert!(!process_alive(child), "exit 70 but the command {child} still runs"),
        _ => out.fail("should keep its lock (0) or stop the command (70)"),
    }
    // A new lock through the group alone lands on the new master, once a
    // replica follows it (the demoted master, reconfigured by the
    // Sentinels some seconds after the switch): until then the group has
    // no vote.
    let key2 = unique_key("after-failover");
    let out = Redlock::new(&group.url())
        .args(["acquire", "--wait", "40s", "--key", &key2, "--ttl", "30s"])
        .run();
    out.expect(0);
    assert_eq!(new_master.get(&lock_key(&key2)).as_deref(), Some(out.line()));
}

#[test]
fn a_group_slower_to_resolve_than_the_quorum_still_gets_the_lock() {
    // The group's master is found through the Sentinels (a round trip to
    // each, then ROLE) before the lock can be set there; two plain servers
    // grant a quorum long before. The won round must still let the
    // group's vote land: otherwise the lock rests on a bare quorum, and
    // after a failover the group has nothing to renew (the failure once
    // seen as "new master renewed: false").
    let group = SentinelGroup::start();
    let plain = Fleet::start(2);
    let proxies: Vec<Proxy> = group.sentinels.iter().map(|s| Proxy::start(s.port)).collect();
    for proxy in &proxies {
        proxy.set(Mode::Delay(Duration::from_millis(300)));
    }
    let hosts: Vec<String> = proxies.iter().map(|p| format!("127.0.0.1:{}", p.port)).collect();
    let slow_group = format!("redis+sentinel://{}/{SERVICE}", hosts.join(","));
    let key = unique_key("slow-group");
    let out = Redlock::new(&format!("{slow_group},{}", plain.urls()))
        .args(["-v", "acquire", "-n", "--node-timeout", "5s", "--key", &key, "--ttl", "30s"])
        .run();
    out.expect(0);
    let token = out.line();
    assert!(
        out.stderr.contains("granted by 2 of 3 (quorum 2), 1 not awaited"),
        "decided before the group answered: {}",
        out.stderr
    );
    assert_eq!(
        group.master().get(&lock_key(&key)).as_deref(),
        Some(token),
        "the group never got the lock\n{}",
        out.stderr
    );
    // A command done before the group's vote lands: the release there
    // waits for it, and leaves nothing behind.
    let key = unique_key("slow-group-run");
    Redlock::new(&format!("{slow_group},{}", plain.urls()))
        .args(["run", "--node-timeout", "5s", "--key", &key, "--ttl", "60s", "--", "true"])
        .run()
        .expect(0);
    assert_eq!(group.master().get(&lock_key(&key)), None, "left on the group after release");
    assert_eq!(plain.values(&lock_key(&key)), [None, None]);
}

#[test]
fn a_killed_master_is_replaced_and_redlock_reaches_the_new_one() {
    let mut group = SentinelGroup::start();
    let url = group.url();
    let key = unique_key("killed-master");
    acquire(&url, &key, "500ms");
    let old = group.master().port;
    let index = group.servers.iter().position(|s| s.port == old).unwrap();
    group.servers[index].stop();
    // While the Sentinels have not yet agreed, the group is unavailable
    // (69 with -n), never a replica's vote.
    let out = Redlock::new(&url).args(["acquire", "-n", "--key", &unique_key("during")]).run();
    assert!(matches!(out.code(), 0 | 69), "{}", out.stderr);
    let new = group.await_new_master(old);
    // The promoted replica has no replica of its own: nothing it grants
    // would survive its failure, so the group has no vote.
    Redlock::new(&url)
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(69)
        .stderr_has("not confirmed on the replicas");
    // The old master back (empty): the Sentinels make it a replica of the
    // new one, and the group votes again.
    group.servers[index].start_again();
    let token = Redlock::new(&url).args(["acquire", "--wait", "40s", "--key", &key]).run();
    token.expect(0);
    let new_master = group.servers.iter().find(|s| s.port == new).unwrap();
    assert_eq!(new_master.get(&lock_key(&key)).as_deref(), Some(token.line()));
    assert_eq!(group.servers[index].get(&lock_key(&key)).as_deref(), Some(token.line()));
}

#[test]
fn a_sentinel_that_names_a_replica_gets_no_vote() {
    let group = SentinelGroup::start();
    let replica = group.servers.iter().find(|s| s.port != group.master().port).unwrap();
    // A replica that would take the write: only the ROLE check keeps
    // redlock from counting its vote.
    let _: String = replica.cmd(&["CONFIG", "SET", "replica-read-only", "no"]);
    let stray = Sentinel::start(replica.port);
    assert_eq!(stray.master_port(), Some(replica.port));
    let url = format!("redis+sentinel://{}/{SERVICE}", stray.address());
    let key = unique_key("replica-vote");
    Redlock::new(&url)
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(69)
        .stderr_has("whose role is \"slave\", not master");
    assert_eq!(replica.get(&lock_key(&key)), None, "written on a replica");
}

#[test]
fn a_replica_s_readonly_reply_is_retried_as_unavailable_not_a_lasting_error() {
    let master = RedisServer::start();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port.to_string()]);
    let key = unique_key("readonly");
    // A plain URL naming a replica: READONLY is what a demoted master
    // answers too. It is retried like a broken connection (reconnecting, so
    // that a Sentinel group asks for the new master) until the wait ends
    // (69), and said in one line.
    let out = Redlock::new(&replica.url()).args(["acquire", "--wait", "1s", "--key", &key]).run();
    out.expect(69).stderr_has("the server is a replica now");
    assert!(out.elapsed >= Duration::from_millis(900), "ended before the wait: {:?}", out.elapsed);
    assert!(out.stderr.lines().all(|l| l.starts_with("redlock: ")), "{}", out.stderr);
    assert_eq!(master.get(&lock_key(&key)), None);
}

#[test]
fn a_sentinel_that_wants_a_password_is_told_about_sentinel_password() {
    let master = RedisServer::start_with(&["--requirepass", "master-pw-5e1"]);
    let sentinel = Sentinel::start_with(
        master.port,
        &["requirepass sentinel-pw-6f2", &format!("sentinel auth-pass {SERVICE} master-pw-5e1")],
    );
    let key = unique_key("sentinel-auth");
    // The master's password (in the URL, from --password-file or
    // REDLOCK_PASSWORD) is never sent to a Sentinel: say what is.
    for url in [
        format!("redis+sentinel://:master-pw-5e1@{}/{SERVICE}", sentinel.address()),
        format!("redis+sentinel://{}/{SERVICE}", sentinel.address()),
    ] {
        Redlock::new(&url)
            .env("REDLOCK_PASSWORD", "master-pw-5e1")
            .args(["acquire", "--wait", "10s", "--key", &key])
            .run()
            .expect(69)
            .within(Duration::from_secs(5))
            .stderr_has("?sentinel_password=")
            .stderr_lacks("REDLOCK_PASSWORD")
            .stderr_lacks("pw-");
    }
    // With it, the Sentinel answers (and the wrong one is said as such).
    let wrong =
        format!("redis+sentinel://{}/{SERVICE}?sentinel_password=not-it-7a", sentinel.address());
    Redlock::new(&wrong)
        .args(["acquire", "-n", "--key", &key])
        .run()
        .expect(69)
        .stderr_has("sentinel_password")
        .stderr_lacks("not-it-7a");
}

#[test]
fn rediss_sentinel_at_a_plain_or_silent_port_asks_whether_it_is_a_tls_port() {
    let plain = RedisServer::start();
    // A port that accepts connections and never says a word.
    let silent = crate::harness::redis::listen();
    let silent_port = silent.local_addr().unwrap().port();
    for port in [plain.port, silent_port] {
        let url = format!("rediss+sentinel://127.0.0.1:{port}/{SERVICE}");
        Redlock::new(&url)
            .args(["--node-timeout", "300ms", "acquire", "-n", "--key", &unique_key("tls")])
            .run()
            .expect(69)
            .stderr_has("is it a TLS port?");
    }
}

/// The replica of `group` that is not `master_port`.
fn other_server(group: &SentinelGroup, master_port: u16) -> &RedisServer {
    group.servers.iter().find(|s| s.port != master_port).expect("a second server")
}

/// The first element of `ROLE` on `server`.
fn role_of(server: &RedisServer) -> String {
    let role: Vec<redis::Value> = server.cmd(&["ROLE"]);
    match role.first() {
        Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

/// Waits until the master of `group` has a replica whose link is up, so
/// that the next `SENTINEL FAILOVER` has a replica to promote.
fn await_replicated(group: &SentinelGroup) {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let master = group.sentinels[0].master_port();
        let linked = group.servers.iter().any(|s| {
            Some(s.port) != master && {
                let info: String = s.cmd(&["INFO", "replication"]);
                info.contains("master_link_status:up")
                    && master.is_some_and(|m| info.contains(&format!("master_port:{m}")))
            }
        });
        let known = group.sentinels.iter().all(|s| {
            let replicas: Vec<std::collections::HashMap<String, String>> =
                s.cmd(&["SENTINEL", "replicas", SERVICE]);
            replicas.iter().any(|r| {
                r.get("flags").is_some_and(|f| f == "slave")
                    && r.get("master-link-status").is_some_and(|l| l == "ok")
            })
        });
        if linked && known {
            return;
        }
        assert!(Instant::now() < deadline, "the group never got its replica back");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The scenario of a failover with three members: a group (master,
/// replica, three Sentinels) and two plain servers b and c, quorum 2, c
/// unreachable from the first job. After `SENTINEL FAILOVER` promotes the
/// replica, the Sentinels that did not lead it name the old master for
/// another second or two, and the old master still says `master`: job X
/// then writes on the old master (and b). Once the Sentinels switched and
/// c is back, job Y, with the same URL, finds the new, empty master and c.
/// The old master has no replica any more, so nothing it grants survives:
/// X must not count its vote, or both hold the lock.
#[test]
fn a_master_failed_away_from_gives_no_vote_so_no_second_holder() {
    let group = SentinelGroup::start();
    let b = RedisServer::start();
    let c = RedisServer::start();
    let c_path = Proxy::start(c.port);
    // The Sentinel that leads the failover (it is asked to) learns of the
    // promotion first; delayed, the others' answers come first, as they
    // would from a nearer Sentinel.
    let sentinel_paths: Vec<Proxy> = group.sentinels.iter().map(|s| Proxy::start(s.port)).collect();
    sentinel_paths[0].set(Mode::Delay(Duration::from_millis(300)));
    let hosts: Vec<String> =
        sentinel_paths.iter().map(|p| format!("127.0.0.1:{}", p.port)).collect();
    let url = format!("redis+sentinel://{}/{SERVICE}", hosts.join(","));
    let servers = format!("{url},{},{}", b.url(), c_path.url());
    let mut in_window = 0;
    for round in 0..3 {
        await_replicated(&group);
        let key = unique_key("failed-away");
        let old = group.master().port;
        let old_master = group.servers.iter().find(|s| s.port == old).unwrap();
        let promoted = other_server(&group, old);
        c_path.set(Mode::Stall);
        let _: String = group.sentinels[0].cmd(&["SENTINEL", "FAILOVER", SERVICE]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while role_of(promoted) != "master" {
            assert!(Instant::now() < deadline, "the replica was never promoted");
            std::thread::sleep(Duration::from_millis(5));
        }
        let naming_old = group.sentinels.iter().filter(|s| s.master_port() == Some(old)).count();
        let x = Redlock::new(&servers)
            .args(["-v", "acquire", "-n", "--key", &key, "--ttl", "30s"])
            .run();
        let x_on_old = old_master.get(&lock_key(&key));
        group.await_new_master(old);
        c_path.set(Mode::Pass);
        let y = Redlock::new(&servers)
            .args(["-v", "acquire", "-n", "--key", &key, "--ttl", "30s"])
            .run();
        eprintln!(
            "round {round}: {naming_old} Sentinel(s) named the old master at X; X exit {} \
             (on the old master: {x_on_old:?}), Y exit {}\n--- X\n{}--- Y\n{}",
            x.code(),
            y.code(),
            x.stderr,
            y.stderr
        );
        assert!(
            !(x.code() == 0 && y.code() == 0),
            "two holders of {key}: X {} (old master {old} holds {x_on_old:?}) and Y {}\n\
             --- X\n{}--- Y\n{}",
            x.line(),
            y.line(),
            x.stderr,
            y.stderr
        );
        if naming_old >= 2 {
            in_window += 1;
        }
        if in_window >= 2 {
            return;
        }
    }
    assert!(in_window > 0, "X never ran while the Sentinels still named the old master");
}

/// Repeated failovers of a group that is the only member, under racing
/// workers, each appending its entry and exit to a ledger: no two inside
/// at once, whatever the Sentinels, the old master and the new one say.
#[test]
fn repeated_failovers_under_racing_workers_never_admit_two() {
    let group = SentinelGroup::start();
    let url = group.url();
    let key = unique_key("failover-race");
    let dir = tempfile::tempdir().unwrap();
    let section = crate::harness::ledger::section(dir.path(), "0.3");
    let stop = dir.path().join("stop");
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (url, key, section, stop) =
                (url.clone(), key.clone(), section.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut codes = std::collections::BTreeMap::<i32, usize>::new();
                while !stop.exists() {
                    let out = Redlock::new(&url)
                        .args(["run", "-n", "--key", &key, "--ttl", "3s", "-c", &section])
                        .run();
                    *codes.entry(out.code()).or_default() += 1;
                    std::thread::sleep(Duration::from_millis(fastrand::u64(100..200)));
                }
                codes
            })
        })
        .collect();
    for _ in 0..4 {
        await_replicated(&group);
        std::thread::sleep(Duration::from_millis(1500));
        let old = group.master().port;
        let _: String =
            group.sentinels[fastrand::usize(0..3)].cmd(&["SENTINEL", "FAILOVER", SERVICE]);
        group.await_new_master(old);
    }
    std::thread::sleep(Duration::from_secs(2));
    std::fs::write(&stop, "").unwrap();
    let mut codes = std::collections::BTreeMap::<i32, usize>::new();
    for w in workers {
        for (code, n) in w.join().expect("worker") {
            *codes.entry(code).or_default() += n;
        }
    }
    let (most, sections) = crate::harness::ledger::audit(dir.path());
    eprintln!("exit codes {codes:?}; {sections} sections, at most {most} inside at once");
    assert_eq!(most, 1, "two workers inside at once");
    assert!(sections > 0, "no worker ever ran: {codes:?}");
    assert!(codes.keys().all(|c| matches!(c, 0 | 69 | 70 | 75)), "{codes:?}");
}

/// A Sentinel that names another server for the same service (a split, a
/// stale or misconfigured Sentinel): the group resolves its master only
/// when more than half of the listed Sentinels name the same address.
#[test]
fn sentinels_that_disagree_give_the_group_no_vote_and_doctor_an_error() {
    let mut group = SentinelGroup::start();
    let other = RedisServer::start();
    let stray = Sentinel::start(other.port);
    let mut hosts: Vec<String> = group.sentinels.iter().map(Sentinel::address).collect();
    hosts.push(stray.address());
    let url = format!("redis+sentinel://{}/{SERVICE}", hosts.join(","));
    let key = unique_key("split");
    // Three of four name the master: a majority.
    let token = acquire(&url, &key, "30s");
    assert_eq!(group.master().get(&lock_key(&key)).as_deref(), Some(token.as_str()));
    let plain = Fleet::start(2);
    let fleet = format!("{url},{}", plain.urls());
    let doctor = Redlock::new(&fleet).args(["doctor"]).run();
    assert!(doctor.stdout.contains("disagree"), "{}", doctor.stdout);
    // Two of them stopped: one names the master, one the other server.
    group.sentinels[0].stop();
    group.sentinels[1].stop();
    for _ in 0..8 {
        let out = Redlock::new(&url).args(["acquire", "-n", "--key", &key, "--ttl", "30s"]).run();
        assert_ne!(out.code(), 0, "a second holder through the stray Sentinel: {}", out.stderr);
        out.expect(69);
    }
    assert_eq!(other.get(&lock_key(&key)), None, "written where the stray Sentinel points");
    let doctor = Redlock::new(&fleet).args(["doctor"]).run();
    assert!(!doctor.stdout.contains("verdict: works"), "{}", doctor.stdout);
    assert!(!doctor.stdout.contains("verdict: fit"), "{}", doctor.stdout);
    assert!(doctor.stdout.contains("error: "), "{}", doctor.stdout);
    assert_ne!(doctor.code(), 0);
    assert_ne!(doctor.code(), 1);
}

/// Without scripts, an operation writes on a connection of its own
/// (`WATCH`/`MULTI`/`EXEC`), and its vote is confirmed all the same (on
/// that connection: `WAIT` counts its own connection's writes). A `run`
/// holds the lock; the replica is then frozen: its renewals are written
/// but never confirmed, so the command is stopped (70).
#[test]
fn without_scripts_a_group_confirms_each_vote_where_it_wrote() {
    let group = SentinelGroup::start_with(1, crate::harness::redis::NO_SCRIPTS);
    let url = group.url();
    let key = unique_key("noscript-group");
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    let running = Redlock::new(&url)
        .args(["run", "--key", &key, "--ttl", "3s", "-c"])
        .args([format!("touch {}; sleep 6", ready.display())])
        .spawn();
    wait_for_file(&ready);
    let master = group.master().port;
    let replica = other_server(&group, master);
    assert!(replica.get(&lock_key(&key)).is_some(), "the acquisition was replicated");
    replica.hang();
    let out = running.wait();
    replica.resume();
    out.expect(70).stderr_has("not confirmed on the replicas");
}

/// With two replicas, a write counts only once both have it: a replica
/// that a failover left following the old master would otherwise confirm
/// a write there that the promoted one never gets.
#[test]
fn with_two_replicas_a_vote_waits_for_both() {
    let group = SentinelGroup::start_with(2, &[]);
    let url = group.url();
    acquire(&url, &unique_key("two-replicas"), "30s");
    let master = group.master().port;
    let frozen = group.servers.iter().find(|s| s.port != master).unwrap();
    frozen.hang();
    let out = Redlock::new(&url)
        .args(["--node-timeout", "500ms", "acquire", "-n", "--key", &unique_key("one-frozen")])
        .run();
    frozen.resume();
    out.expect(69).stderr_has("1 of 2 replica(s) acknowledged");
}
