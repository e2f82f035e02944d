//! The checker: reads a history ([`crate::history`]) and reports every
//! violation of redlock's promises, each with the lines that show it.
//!
//! - **Exclusion**: two sections of an exclusive key at once; more than N
//!   of a `--limit N` key; an exclusive section beside any other of a
//!   `--shared` key. A section is a `run`'s command, from its entry to its
//!   exit (stamped by the command itself, so the interval lies inside the
//!   real one: an overlap seen is an overlap that happened), or a script's
//!   hold: from `acquire`'s completion to the `release` of its token, at
//!   most the validity an `acquire` or `extend` gave it (invocation + TTL
//!   − the drift allowance; for an `acquire` that waited, later, from its
//!   fence and printed validity: [`acquired_until`]). Operations of unknown outcome hold nothing
//!   for certain, so they never make an overlap; they only count as
//!   possibly holding (below).
//!   A foreign write over the key on a majority ends every hold it meets
//!   where it begins (it broke the premise of exclusion); what is checked
//!   then is that the holder notices (`foreign-unnoticed`, see
//!   [`foreign_writes`]).
//! - **Fences**: a section that began after another ended must carry a
//!   larger fence (so none repeats between ordered sections).
//! - **Exit status**: a `run`'s exit code is its command's when the
//!   command exited by itself; 70 or 124 when redlock stopped it; a
//!   documented refusal (69, 75 or `-E`'s code) when it never ran; never a
//!   "busy" for a command that ran, never the command's code for a command
//!   that did not run, never an undocumented code.
//! - **Lost ticks**: a cron burst (`run -n -E 0` fired at once) in which
//!   every host was told "busy" while nothing held or possibly held the key.
//! - **Once per tick**: the cron fleet's sections of one tick (the tick the
//!   command was given, `REDLOCK_TICK`; without `--once-per`, the tick of
//!   the host's wall clock when it was fired) number at most one, whatever
//!   the faults (`tick-twice`); a `REDLOCK_TICK` lies between the host's
//!   tick when fired and the tick of its entry (`tick-label`); and a
//!   quiet `--once-per` tick (some host was fired for it, and no fault was
//!   active from a longest TTL before it until its last host ended) that
//!   never ran is lost when one of its hosts was told "busy" while no
//!   holder, possible holder (an operation killed or of unknown end, for
//!   its TTL after) or foreign write met it, unless a `--once-per` host of
//!   the tick died (it may have been granted the tick and died before its
//!   command ran) (`lost-tick`). A `--once-per` section begins before its
//!   tick ends, give or take the clock allowance ([`tick_late`]): a host
//!   held up past its tick's end (frozen during its `--jitter`) must skip
//!   it, not run it late, when the tick's record may be gone
//!   (`tick-late`).
//! - **Taken meanwhile**: a `-n` run's section never begins after a
//!   section (or a script hold) of the same exclusive key whose operation
//!   was invoked after the `-n` one (`taken-meanwhile`). The invocation is
//!   stamped before redlock is forked, and redlock counts takes from the
//!   first thing its `main` does (`src/lock/record.rs`), so a holder
//!   invoked after it was granted after the `-n` began, unless the `-n`
//!   took longer from the stamp to its `main` (a fork, an exec and the
//!   loader: a millisecond or so) than the holder from its own stamp to a
//!   grant (the same, and a connection and a round); its first request
//!   misses only a take granted and released while that request was on
//!   its way.
//! - **A freeze's gaps** (`freeze-taken`): while a freeze (`hold`, the
//!   freezer's) holds its key by its own view, every other holder's
//!   section or script hold that overlaps it lies inside one of the gaps
//!   the freeze recorded in the key's history, within the clocks' slack
//!   ([`freeze_taken`]): a freeze that lost the key records the gap.
//! - **Another schedule is refused** (`schedule-refused`): a run of
//!   another schedule than its key's record names exits 64, never runs its
//!   command, never skips with 0 or the busy code ([`schedule_refused`]).
//! - **Liveness**: once faults stop, every waiter gets in.
//! - **Unavailable means unreachable** (`unavailable-quiet`): a `-n` that
//!   exits 69 had a fault active from [`AFTER_FAULT_NS`] before its
//!   invocation to its end. Servers that were only slow to answer (this
//!   machine loaded) are asked again until they answer, within `-n`'s
//!   bound ("servers too slow to answer", `--help`).
//! - **Stated bounds** (`bound`): a `run` or `acquire` answers within what
//!   `--help` and `docs/commands.md` state: `--wait DUR` within DUR
//!   ("Wait at most DUR for the lock"; the last attempt is cut at the
//!   deadline, and `--wait 0` makes one whole attempt, a node timeout),
//!   `-n` within 6 s plus a node timeout ([`NO_WAIT_ANSWER_NS`]). The
//!   answer's time is read from the history: from the invocation to the
//!   section's entry for a `run` that got in (the command starts just after
//!   the grant and its fence), else to the process's end (a refusal exits
//!   just after it is decided). Each may take one more node timeout after
//!   the decision (the fence round, the record of a busy skip, or the
//!   calls finished before exit), and [`BOUND_SLACK_NS`] for this machine.
//!   An operation whose redlock a fault froze (SIGSTOP) before its answer
//!   is excused: a stopped process keeps no time, so no bound is stated
//!   for it.

use std::collections::BTreeMap;

use crate::history::{Event, Mode};

/// The drift allowance of a TTL, as redlock computes it (factor 0.01 plus
/// 2 ms), in ns.
fn drift_ns(ttl_ms: u64) -> u64 {
    ttl_ms * 10_000 + 2_000_000
}

/// One violation: what, and the history lines that show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// `overlap`, `fence`, `exit-status`, `lost-tick`, `tick-twice`,
    /// `tick-label`, `tick-late`, `taken-meanwhile`, `liveness`, `bound`,
    /// `foreign-unnoticed`, `unavailable-quiet`, `loud-skip`,
    /// `freeze-taken`, `schedule-refused`.
    pub kind: &'static str,
    /// One line for people.
    pub message: String,
    /// The history lines involved.
    pub lines: Vec<usize>,
}

/// Everything known of one operation.
#[derive(Clone, Debug, Default)]
struct Op {
    line: usize,
    f: String,
    key: String,
    mode: Option<Mode>,
    limit: u32,
    ttl_ms: u64,
    burst: Option<u64>,
    child_code: Option<i32>,
    busy_code: Option<i32>,
    after_faults: bool,
    token_in: Option<String>,
    op: u64,
    no_wait: bool,
    /// `--wait`, in ms.
    wait_ms: Option<u64>,
    every_ms: Option<u64>,
    once_per: bool,
    wall_ms: u64,
    /// `--node-timeout`, in ms, when given.
    node_timeout_ms: Option<u64>,
    /// `REDLOCK_SLOT`.
    slot: Option<u32>,
    /// `REDLOCK_TICK`, as ms since the epoch (unparsable: `Some(None)`).
    tick_label: Option<Option<u64>>,
    invoke: u64,
    complete: Option<Completion>,
    /// What `acquire --json` said the fence was.
    fence: Option<u64>,
    enter: Option<(usize, u64, Option<u64>)>,
    exit: Option<(usize, u64, String, Option<i32>)>,
    /// What it printed on stderr, if it was to skip without a word.
    said: Option<(usize, String)>,
    /// `hold --for`, in ms.
    for_ms: Option<u64>,
    /// A `run` of another schedule than its key's record names.
    other_schedule: bool,
    /// A freeze's lines (line, when they arrived, their event) and the
    /// campaign's SIGTERM (`signalled`), in time order.
    freeze: Vec<(usize, u64, String)>,
    /// The gaps a freeze recorded, once read.
    gaps: Option<Recorded>,
}

/// The gaps a freeze recorded in its key's history, as read.
#[derive(Clone, Debug)]
struct Recorded {
    /// The history line.
    line: usize,
    /// Whether the key's history was read from a quorum.
    read: bool,
    /// Each gap's start and end, in wall ms.
    gaps: Vec<(u64, u64)>,
}

impl Op {
    /// When a freeze took its key, by its own view: the line that said so
    /// (`hold_started`) and when it arrived.
    fn began(&self) -> Option<(usize, u64)> {
        self.freeze.iter().find(|(.., said)| said == "hold_started").map(|(l, t, _)| (*l, *t))
    }
}

/// How an operation's process ended.
#[derive(Clone, Debug)]
struct Completion {
    line: usize,
    t: u64,
    outcome: String,
    code: Option<i32>,
    token: Option<String>,
    pid: Option<u32>,
    /// What `acquire --json` said the validity was, in ms.
    validity_ms: Option<u64>,
}

/// A foreign write over a key (the `foreign` family): a value that is not
/// redlock's, set with `SET key value PX ms` on some servers.
#[derive(Clone, Debug)]
struct Foreign {
    key: String,
    /// When the nemesis began writing it (before the first `SET`).
    from: u64,
    /// When it expires everywhere it was written: `ms` after the
    /// nemesis's stop stamp (after the last `SET`), or after `from` when
    /// no stop was recorded.
    to: u64,
    ms: u64,
    /// The servers written, by index (empty: not recorded; then every
    /// server counts as written).
    servers: Vec<usize>,
    /// How many servers the run has (0: not recorded).
    fleet: usize,
    what: String,
    stopped: bool,
    line: usize,
}

impl Foreign {
    /// Whether this write's value sits on `server`.
    fn on(&self, server: usize) -> bool {
        self.servers.is_empty() || self.servers.contains(&server)
    }
}

/// A hold of a key for certain, over `[start, end)`.
#[derive(Clone, Debug)]
struct Hold {
    op: u64,
    invoke: u64,
    /// `REDLOCK_SLOT`: the place of a `--limit` key.
    slot: Option<u32>,
    start: u64,
    end: u64,
    exclusive: bool,
    fence: Option<u64>,
    lines: Vec<usize>,
}

/// What the checker saw, for the record.
#[derive(Debug, Default)]
pub struct Summary {
    /// Critical sections and script holds checked.
    pub sections: usize,
    /// Operations.
    pub ops: usize,
    /// Cron bursts.
    pub bursts: usize,
    /// The cron fleet's ticks that some host was fired for.
    pub ticks: usize,
    /// Of those, the ticks where "exactly once" was checked: no fault
    /// active (one that did not run is excused when a host of it died).
    pub quiet_ticks: usize,
    /// Freezes that took their key and whose gaps were read: checked.
    pub freezes: usize,
    /// The gaps those freezes recorded.
    pub gaps: usize,
    /// Freezes that took their key, whose history could not be read.
    pub unread_freezes: usize,
    /// Runs of another schedule than their key's record names.
    pub other_schedules: usize,
    /// Every violation found.
    pub violations: Vec<Violation>,
}

/// What a history says, by kind: the operations, the foreign writes, the
/// faults (what, start, stop) and the freezes' stopped processes (when,
/// which pids).
#[derive(Default)]
struct Read {
    ops: BTreeMap<u64, Op>,
    foreign: Vec<Foreign>,
    faults: Vec<(String, u64, u64)>,
    frozen: Vec<(u64, Vec<u32>)>,
}

/// Reads a history's events into what the checks need.
fn read(events: &[(usize, Event)]) -> Read {
    let mut r = Read::default();
    for (line, event) in events {
        if let Event::Invoke { .. } = event {
            let o = invoked(*line, event);
            r.ops.insert(o.op, o);
            continue;
        }
        let op = match event {
            Event::Complete { op, .. }
            | Event::Enter { op, .. }
            | Event::Exit { op, .. }
            | Event::Said { op, .. }
            | Event::Freeze { op, .. }
            | Event::Gaps { op, .. } => r.ops.get_mut(op),
            _ => None,
        };
        match (event.clone(), op) {
            (Event::Complete { t, outcome, code, token, fence, validity_ms, pid, .. }, Some(o)) => {
                o.complete =
                    Some(Completion { line: *line, t, outcome, code, token, pid, validity_ms });
                o.fence = fence;
            }
            (Event::Enter { t, fence, slot, tick, .. }, Some(o)) => {
                o.enter = Some((*line, t, fence));
                o.slot = slot;
                o.tick_label = tick.map(|text| {
                    text.parse::<jiff::Timestamp>()
                        .ok()
                        .and_then(|at| u64::try_from(at.as_millisecond()).ok())
                });
            }
            (Event::Exit { t, how, code, .. }, Some(o)) => o.exit = Some((*line, t, how, code)),
            (Event::Said { quiet: true, stderr, .. }, Some(o)) => o.said = Some((*line, stderr)),
            (Event::Freeze { t, said, .. }, Some(o)) => o.freeze.push((*line, t, said)),
            (Event::Gaps { read, gaps, .. }, Some(o)) => {
                o.gaps = Some(Recorded { line: *line, read, gaps });
            }
            (Event::Nemesis { t, what, phase, foreign: f, servers, fleet, frozen: pids }, _) => {
                if let Some((key, ms)) = f {
                    r.foreign.push(Foreign {
                        key,
                        from: t,
                        to: t + ms * 1_000_000,
                        ms,
                        servers,
                        fleet,
                        what: what.clone(),
                        stopped: false,
                        line: *line,
                    });
                } else if phase == "stop"
                    && let Some(w) =
                        r.foreign.iter_mut().rev().find(|w| w.what == what && !w.stopped)
                {
                    w.to = t + w.ms * 1_000_000;
                    w.stopped = true;
                }
                if !pids.is_empty() {
                    r.frozen.push((t, pids));
                }
                // A fault is active from its start to its stop; one that
                // never stops (a clock stepped until the end) to the end.
                if phase == "start" {
                    r.faults.push((what, t, u64::MAX));
                } else if let Some(open) =
                    r.faults.iter_mut().rev().find(|(w, _, end)| *w == what && *end == u64::MAX)
                {
                    open.2 = t;
                }
            }
            _ => {}
        }
    }
    r
}

/// The operation an `invoke` event (on `line`) begins.
fn invoked(line: usize, event: &Event) -> Op {
    let Event::Invoke {
        t,
        op,
        f,
        key,
        mode,
        limit,
        ttl_ms,
        burst,
        child_code,
        busy_code,
        after_faults,
        token,
        no_wait,
        wait_ms,
        every_ms,
        once_per,
        wall_ms,
        node_timeout_ms,
        for_ms,
        other_schedule,
        ..
    } = event.clone()
    else {
        return Op::default();
    };
    Op {
        line,
        f,
        key,
        mode: Some(mode),
        limit,
        ttl_ms,
        burst,
        child_code,
        busy_code,
        after_faults,
        token_in: token,
        op,
        no_wait,
        wait_ms,
        every_ms,
        once_per,
        wall_ms,
        node_timeout_ms,
        for_ms,
        other_schedule,
        invoke: t,
        ..Op::default()
    }
}

/// Checks a history (events in time order, with their line numbers).
pub fn check(events: &[(usize, Event)]) -> Summary {
    let Read { ops, foreign, faults, frozen } = read(events);
    let mut summary = Summary { ops: ops.len(), ..Summary::default() };
    let mut holds = holds(&ops);
    foreign_writes(&ops, &mut holds, &foreign, &frozen, &mut summary.violations);
    summary.sections = holds.values().map(Vec::len).sum();
    for (key, list) in &holds {
        // A key any shared holder used is a `--shared` key (its writers
        // are exclusive holders of it); else the mode of its holders.
        let modes: Vec<Mode> =
            ops.values().filter(|o| &o.key == key).filter_map(|o| o.mode).collect();
        let mode =
            if modes.contains(&Mode::Shared) { Some(Mode::Shared) } else { modes.first().copied() };
        let limit = ops.values().filter(|o| &o.key == key).map(|o| o.limit).max().unwrap_or(1);
        exclusion(key, list, mode, limit, &mut summary.violations);
        fences(key, list, mode, &mut summary.violations);
    }
    for o in ops.values().filter(|o| o.f == "run") {
        loud_skip(o, &mut summary.violations);
        exit_status(o, &mut summary.violations);
        liveness(o, &mut summary.violations);
        summary.other_schedules += schedule_refused(o, &mut summary.violations);
    }
    for o in ops.values() {
        bound(o, &frozen, &mut summary.violations);
    }
    summary.bursts = lost_ticks(&ops, &holds, &foreign, &mut summary.violations);
    let faults: Vec<(u64, u64)> = faults.iter().map(|(_, s, e)| (*s, *e)).collect();
    for o in ops.values() {
        unavailable_quiet(o, &faults, &mut summary.violations);
    }
    (summary.ticks, summary.quiet_ticks) =
        ticks(&ops, &holds, &foreign, &faults, &mut summary.violations);
    taken_meanwhile(&ops, &holds, &mut summary.violations);
    for o in ops.values().filter(|o| o.f == "hold") {
        let gaps = freeze_taken(o, (&ops, &holds), &foreign, &frozen, &mut summary.violations);
        summary.freezes += usize::from(gaps.is_some());
        summary.gaps += gaps.unwrap_or(0);
        summary.unread_freezes += usize::from(gaps.is_none() && o.began().is_some());
    }
    summary
}

/// The holds for certain of each key.
fn holds(ops: &BTreeMap<u64, Op>) -> BTreeMap<String, Vec<Hold>> {
    let mut out: BTreeMap<String, Vec<Hold>> = BTreeMap::new();
    for o in ops.values() {
        let exclusive = o.mode != Some(Mode::Shared);
        match o.f.as_str() {
            "run" => {
                let Some((enter_line, start, fence)) = o.enter else { continue };
                let (end, mut lines) = match (&o.exit, &o.complete) {
                    (Some((l, t, ..)), _) => (*t, vec![*l]),
                    (None, Some(c)) => (c.t, vec![c.line]),
                    (None, None) => (u64::MAX, vec![]),
                };
                lines.splice(0..0, [o.line, enter_line]);
                out.entry(o.key.clone()).or_default().push(Hold {
                    op: o.op,
                    invoke: o.invoke,
                    slot: o.slot,
                    start,
                    end,
                    exclusive,
                    fence,
                    lines,
                });
            }
            "acquire" => {
                let Some(c) = o.complete.clone() else { continue };
                let Completion { line, t: start, token: Some(token), .. } = c.clone() else {
                    continue;
                };
                if c.outcome != "ok" {
                    continue;
                }
                let fence = o.fence;
                // Every extension that succeeded pushes the validity on.
                let mut valid = acquired_until(o, &c);
                let mut end = u64::MAX;
                let mut lines = vec![o.line, line];
                for later in ops.values().filter(|l| l.token_in.as_deref() == Some(&token)) {
                    let ok = later.complete.as_ref().is_some_and(|c| c.outcome == "ok");
                    if later.f == "extend" && ok && later.invoke < valid {
                        valid = valid
                            .max(later.invoke + later.ttl_ms * 1_000_000 - drift_ns(later.ttl_ms));
                    }
                    if later.f == "release" {
                        end = end.min(later.invoke);
                        lines.push(later.line);
                    }
                }
                // Answered after its validity ran out: it held nothing for
                // certain (an empty hold would sort its end before its
                // start, and stay "inside" for ever).
                if end.min(valid) <= start {
                    continue;
                }
                out.entry(o.key.clone()).or_default().push(Hold {
                    op: o.op,
                    invoke: o.invoke,
                    slot: None,
                    start,
                    end: end.min(valid),
                    exclusive,
                    fence,
                    lines,
                });
            }
            _ => {}
        }
    }
    out
}

/// How far above a server's clock a fence may be drawn (`fence::WINDOW`
/// in src/fence.rs), in ms.
const FENCE_WINDOW_MS: u64 = 100;

/// Until when an `acquire` that succeeded certainly held its key: its
/// winning round began at some `s` no earlier than its invocation, and its
/// keys stay on a quorum until `s` + TTL less the drift allowance, which
/// is also where the `validity_ms` it printed runs out (counted from when
/// the round was decided, after every grant). The invocation alone
/// understates that when the acquire waited before its winning round
/// (`--wait`); the completion would overstate it by the round's own time.
/// The fence bounds the grants from below: a server draws at most its
/// clock plus [`FENCE_WINDOW_MS`] (src/fence.rs, "Upper bound"), and the
/// servers' clocks are this machine's wall clock, so the round was decided
/// no earlier than the fence (µs) less that window, and the validity runs
/// out no earlier than that plus `validity_ms`. A fence that would put the
/// grants after the completion came from a server whose clock runs ahead
/// (the clock family) and bounds nothing.
fn acquired_until(o: &Op, c: &Completion) -> u64 {
    let by_invocation = o.invoke + o.ttl_ms * 1_000_000 - drift_ns(o.ttl_ms);
    let (Some(fence), Some(validity_ms)) = (o.fence, c.validity_ms) else {
        return by_invocation;
    };
    // Wall ms to this history's monotonic ns, through the invocation's
    // stamps, early by the two clocks' slack.
    let granted_wall = (fence / 1_000).saturating_sub(FENCE_WINDOW_MS + WALL_SLACK_MS);
    let granted = o.invoke.saturating_add(granted_wall.saturating_sub(o.wall_ms) * 1_000_000);
    if granted > c.t {
        return by_invocation;
    }
    by_invocation.max(granted + validity_ms * 1_000_000)
}

/// A foreign write over a key on a majority (the `foreign` family) takes
/// the lock from under its holder: the premise of exclusion ("a majority of
/// the servers keeps its data") no longer holds, and once the foreign value
/// expires a newcomer is rightly granted while the old holder has not yet
/// learnt of it (a script holder learns only at its next `extend` or
/// `release`; a `run` at its next renewal, up to a TTL later). So a hold the
/// write met ends, for exclusion and fences, where the write began. What is
/// promised instead is that the holder notices (`foreign-unnoticed`): an
/// `extend` of the token invoked after the write never succeeds (the token
/// is gone from a majority), and a `run`'s section ends within its TTL of
/// the write plus [`BOUND_SLACK_NS`] (its next renewal fails and the
/// command is stopped before the validity of the last one ends), unless a
/// fault froze that run (the documented paused-VM exception).
///
/// "Met" means the hold's operation was invoked before the write began and
/// its section began before a quorum of the servers was free of every
/// foreign value of the key again ([`quorum_free`]): no quorum can grant
/// while foreign values sit on a majority, so such a grant came before the
/// write. A section that began after that was granted over free servers and
/// is not cut: an overlap with it is still reported. The value's own expiry
/// is not that moment: a later write over some of the same servers replaces
/// the value there by its own, which may expire first, and a quorum is free
/// from then on while the first value still sits on a minority.
fn foreign_writes(
    ops: &BTreeMap<u64, Op>,
    holds: &mut BTreeMap<String, Vec<Hold>>,
    foreign: &[Foreign],
    frozen: &[(u64, Vec<u32>)],
    out: &mut Vec<Violation>,
) {
    for w in foreign {
        let (key, from, line) = (&w.key, &w.from, &w.line);
        let free = quorum_free(w, foreign);
        for h in holds.get_mut(key).into_iter().flatten() {
            if !(h.invoke < *from && *from < h.end && h.start < free) {
                continue;
            }
            let o = &ops[&h.op];
            let mut lines = h.lines.clone();
            lines.push(*line);
            let unnoticed = match o.f.as_str() {
                "run" => {
                    let pid = o.complete.as_ref().and_then(|c| c.pid);
                    // Frozen during its section: its redlock kept no time.
                    let stopped = frozen.iter().any(|(t, pids)| {
                        (h.start..h.end).contains(t) && pid.is_some_and(|p| pids.contains(&p))
                    });
                    let allowed = from + o.ttl_ms * 1_000_000 + BOUND_SLACK_NS;
                    (!stopped && h.end != u64::MAX && h.end > allowed).then(|| {
                        format!(
                            "{key}: a run's section went on {} ms after a foreign write took its lock (TTL {} ms)",
                            (h.end - from) / 1_000_000,
                            o.ttl_ms
                        )
                    })
                }
                _ => {
                    let token = o.complete.as_ref().and_then(|c| c.token.as_deref());
                    ops.values()
                        .find(|l| {
                            l.f == "extend"
                                && l.token_in.as_deref() == token
                                && l.invoke >= *from
                                && l.complete.as_ref().is_some_and(|c| c.outcome == "ok")
                        })
                        .map(|l| {
                            lines.push(l.line);
                            format!(
                                "{key}: an extend succeeded after a foreign write took its lock"
                            )
                        })
                }
            };
            if let Some(message) = unnoticed {
                out.push(Violation { kind: "foreign-unnoticed", message, lines });
            }
            // A section that began after the write (its grant came
            // before it) keeps one instant: a hold of no length would sort
            // its end before its start, and stay "inside" forever.
            h.end = (h.start + 1).max(*from);
        }
    }
}

/// When a quorum of the servers was first free of every foreign value of
/// `w`'s key, from `w`'s start on. A server holds, at time `t`, the value of
/// the last write over it begun by `t`, until that value expires (a `SET`
/// replaces the value and its TTL). Without the servers written (an older
/// history), `w`'s own expiry.
fn quorum_free(w: &Foreign, all: &[Foreign]) -> u64 {
    if w.servers.is_empty() || w.fleet == 0 {
        return w.to;
    }
    let same: Vec<&Foreign> = all.iter().filter(|f| f.key == w.key).collect();
    // Servers only come free when a value expires: check w's start and
    // every expiry after it.
    let mut times: Vec<u64> = same.iter().map(|f| f.to).filter(|&t| t > w.from).collect();
    times.push(w.from);
    times.sort_unstable();
    let quorum = w.fleet / 2 + 1;
    times
        .into_iter()
        .find(|&t| {
            let free = (0..w.fleet)
                .filter(|&s| {
                    let last =
                        same.iter().filter(|f| f.from <= t && f.on(s)).max_by_key(|f| f.from);
                    last.is_none_or(|f| f.to <= t)
                })
                .count();
            free >= quorum
        })
        .unwrap_or(w.to)
}

/// More holders at once than the key allows.
fn exclusion(key: &str, holds: &[Hold], mode: Option<Mode>, limit: u32, out: &mut Vec<Violation>) {
    // (time, +1 at a start / -1 at an end, exclusive, index); ends first at
    // equal times: a section that begins as another ends is no overlap.
    let mut edges: Vec<(u64, i8, usize)> = Vec::new();
    for (i, h) in holds.iter().enumerate() {
        edges.push((h.start, 1, i));
        edges.push((h.end, -1, i));
    }
    edges.sort_by_key(|&(t, d, i)| (t, d, i));
    let allowed = if mode == Some(Mode::Limit) { limit.max(1) as usize } else { 1 };
    let mut inside: Vec<usize> = Vec::new();
    for (t, d, i) in edges {
        if d < 0 {
            inside.retain(|&j| j != i);
            continue;
        }
        inside.push(i);
        let exclusive = inside.iter().filter(|&&j| holds[j].exclusive).count();
        let bad = match mode {
            Some(Mode::Shared) => exclusive > 0 && inside.len() > 1,
            _ => inside.len() > allowed,
        };
        if bad {
            let lines = inside.iter().flat_map(|&j| holds[j].lines.clone()).collect();
            out.push(Violation {
                kind: "overlap",
                message: format!(
                    "{key}: {} holders at once ({exclusive} exclusive; {allowed} allowed) at t={t}",
                    inside.len()
                ),
                lines,
            });
        }
    }
}

/// A section that began after another ended, with a fence not above it;
/// or, of two exclusive sections that overlapped (an overlap is itself a
/// violation, but for the documented bound), the later one's fence not
/// above the earlier one's: a store that checks fences would then take a
/// stale holder's write.
fn fences(key: &str, holds: &[Hold], mode: Option<Mode>, out: &mut Vec<Violation>) {
    // Holders of places of a `--limit` key may be handed the same number.
    let overlapping = if mode == Some(Mode::Limit) { &[][..] } else { holds };
    for (i, a) in overlapping.iter().enumerate() {
        for b in &overlapping[i + 1..] {
            let (first, later) = if a.start <= b.start { (a, b) } else { (b, a) };
            let overlap = later.start < first.end;
            if overlap
                && first.exclusive
                && later.exclusive
                && first.fence.is_some()
                && later.fence <= first.fence
            {
                out.push(Violation {
                    kind: "fence",
                    message: format!(
                        "{key}: two holders at once, the later with fence {} not above the earlier's {}",
                        later.fence.unwrap_or_default(),
                        first.fence.unwrap_or_default()
                    ),
                    lines: first.lines.iter().chain(&later.lines).copied().collect(),
                });
            }
        }
    }
    // A section's stamps lie inside its hold, so "ended before it began"
    // orders two holds only where exclusion forced it: a shared reader, or
    // the holder of one of a `--limit` key's places, may have been granted
    // (its fence minted) before another that ended before the first one's
    // command began. Readers are ordered only after the writers before
    // them (below); the holders of a `--limit` key place by place
    // (`REDLOCK_SLOT`).
    if mode == Some(Mode::Limit) {
        let mut places: BTreeMap<Option<u32>, Vec<&Hold>> = BTreeMap::new();
        for h in holds {
            places.entry(h.slot).or_default().push(h);
        }
        for place in places.values() {
            ordered(key, place, out);
        }
    } else {
        ordered(key, &holds.iter().collect::<Vec<_>>(), out);
    }
}

/// Holds that began after another ended, with a fence not above it.
fn ordered(key: &str, holds: &[&Hold], out: &mut Vec<Violation>) {
    let mut fenced: Vec<&Hold> = holds.iter().copied().filter(|h| h.fence.is_some()).collect();
    let mut ends: Vec<&Hold> = fenced.clone();
    fenced.sort_by_key(|h| h.start);
    ends.sort_by_key(|h| h.end);
    let mut best: Option<&Hold> = None;
    let mut best_writer: Option<&Hold> = None;
    let mut e = 0;
    for h in fenced {
        while e < ends.len() && ends[e].end <= h.start {
            if best.is_none_or(|b| ends[e].fence > b.fence) {
                best = Some(ends[e]);
            }
            if ends[e].exclusive && best_writer.is_none_or(|b| ends[e].fence > b.fence) {
                best_writer = Some(ends[e]);
            }
            e += 1;
        }
        let before = if h.exclusive { best } else { best_writer };
        if let Some(b) = before
            && b.fence >= h.fence
        {
            out.push(Violation {
                kind: "fence",
                message: format!(
                    "{key}: fence {} after a section with fence {} that ended before it began",
                    h.fence.unwrap_or_default(),
                    b.fence.unwrap_or_default()
                ),
                lines: b.lines.iter().chain(&h.lines).copied().collect(),
            });
        }
    }
}

/// A `run`'s exit code against what its command did.
fn exit_status(o: &Op, out: &mut Vec<Violation>) {
    let Some(Completion { line, code: Some(code), .. }) = &o.complete else { return };
    let code = *code;
    let busy = [75, o.busy_code.unwrap_or(75)];
    let mut lines = vec![o.line, *line];
    let why = match (&o.enter, &o.exit) {
        (Some((l, ..)), exit) => {
            lines.push(*l);
            if let Some((l, ..)) = exit {
                lines.push(*l);
            }
            match exit {
                // A stop that redlock began (the lock lost, --max-hold) as
                // the command ended by itself: 70 or 124 says that the lock
                // was lost while it ran. (One that ended long before the
                // stop keeps its status: found.rs tests it.)
                Some((_, _, how, Some(c)))
                    if how == "normal" && code != *c && ![70, 124].contains(&code) =>
                {
                    Some(format!("the command exited {c} by itself, but run exited {code}"))
                }
                Some((_, _, how, _)) if how != "normal" && ![70, 124].contains(&code) => {
                    Some(format!("the command was stopped ({how}), but run exited {code}"))
                }
                _ if busy.contains(&code) && o.child_code != Some(code) => {
                    Some(format!("the command ran, but run exited {code} (busy)"))
                }
                _ => None,
            }
        }
        (None, _) => {
            let mut documented = vec![69, 70, 75, o.busy_code.unwrap_or(75)];
            // A run of another schedule is refused with 64 (`schedule_refused`).
            if o.other_schedule {
                documented.push(64);
            }
            if o.child_code == Some(code) && !documented.contains(&code) {
                Some(format!("run exited {code}, the command's code, but the command never ran"))
            } else if !documented.contains(&code) {
                Some(format!("the command never ran, and run exited {code}, no documented refusal"))
            } else {
                None
            }
        }
    };
    if let Some(why) = why {
        out.push(Violation { kind: "exit-status", message: format!("{}: {why}", o.key), lines });
    }
}

/// A cron host of the fleet (`--once-per -E 0`, no `-v`) that did not run
/// its command and exited 0 (it skipped) but printed a line that is not
/// about the servers: a cron mail about a tick another host ran. An
/// outage's lines (they name the servers) are what a person must see.
fn loud_skip(o: &Op, out: &mut Vec<Violation>) {
    let (Some((said, stderr)), None) = (&o.said, &o.enter) else { return };
    let Some(c) = o.complete.as_ref().filter(|c| c.code == Some(0)) else { return };
    if let Some(line) = stderr.lines().find(|l| !l.contains("server")) {
        out.push(Violation {
            kind: "loud-skip",
            message: format!("{}: a host that skipped its tick printed {line:?}", o.key),
            lines: vec![o.line, c.line, *said],
        });
    }
}

/// How long a fault's effects may outlast its stop, in ns: a server
/// restarted empty gives no vote for the longest TTL plus 1 s (`--max-ttl
/// 2s`), and a resumed server first answers what queued meanwhile.
const AFTER_FAULT_NS: u64 = 4_000_000_000;

/// A `-n` that exited 69 (unavailable, or votes split past the bound)
/// while no fault was active from [`AFTER_FAULT_NS`] before its invocation
/// to its end.
fn unavailable_quiet(o: &Op, faults: &[(u64, u64)], out: &mut Vec<Violation>) {
    let Some(c) = o.complete.as_ref().filter(|c| c.code == Some(69)) else { return };
    if !o.no_wait || !matches!(o.f.as_str(), "run" | "acquire") {
        return;
    }
    let from = o.invoke.saturating_sub(AFTER_FAULT_NS);
    if faults.iter().any(|&(s, e)| s < c.t && e > from) {
        return;
    }
    out.push(Violation {
        kind: "unavailable-quiet",
        message: format!("{}: {} -n exited 69 with no fault near it", o.key, o.f),
        lines: vec![o.line, c.line],
    });
}

/// A waiter after the faults stopped that did not get in.
fn liveness(o: &Op, out: &mut Vec<Violation>) {
    if !o.after_faults {
        return;
    }
    let ran = o.enter.is_some() && o.complete.as_ref().is_some_and(|c| c.code == o.child_code);
    if !ran {
        let code = o.complete.as_ref().and_then(|c| c.code);
        out.push(Violation {
            kind: "liveness",
            message: format!(
                "{}: a waiter after the faults stopped never got in (exit {code:?})",
                o.key
            ),
            lines: vec![o.line],
        });
    }
}

/// `-n`'s longest answer as `--help` states it ("Settling a tie with other
/// contenders, or a dead waiter's turn in the queue, takes at most 6s plus
/// a node timeout"; `docs/commands.md`: "its answer comes within 6 s plus
/// one node timeout"), less that node timeout, in ns.
const NO_WAIT_ANSWER_NS: u64 = 6_000_000_000;

/// What the bound check allows beyond a stated bound, in ns: the time
/// between the stamps and redlock's own clock (the spawn before redlock
/// starts, the command's start before its entry stamp, the reaping of the
/// process), which on this loaded 2-core machine, with some forty
/// processes of the campaign at once, reaches hundreds of ms. It hides an
/// overrun below it: one node timeout of the campaign's TTLs (at most
/// 200 ms) goes unseen here; the integration tests time those alone.
const BOUND_SLACK_NS: u64 = 1_000_000_000;

/// The node timeout of `o` (`--node-timeout`), in ns: when none is given,
/// a tenth of the TTL, at most 1 s.
fn node_timeout_ns(o: &Op) -> u64 {
    o.node_timeout_ms.map_or((o.ttl_ms * 100_000).min(1_000_000_000), |ms| ms * 1_000_000)
}

/// A `run` or `acquire` that answered later than its stated bound allows
/// (see the module doc), unless a freeze in `frozen` (when, which pids)
/// stopped its process before it answered.
fn bound(o: &Op, frozen: &[(u64, Vec<u32>)], out: &mut Vec<Violation>) {
    if !matches!(o.f.as_str(), "run" | "acquire") {
        return;
    }
    // No exit code: the campaign killed it (a waiter killed while queued)
    // or it hung (reported as a hang); neither answered.
    let Some(c) = o.complete.as_ref().filter(|c| c.code.is_some()) else { return };
    let nt = node_timeout_ns(o);
    let stated = match (o.no_wait, o.wait_ms) {
        (true, _) => NO_WAIT_ANSWER_NS + nt,
        (false, Some(0)) => nt,
        (false, Some(ms)) => ms * 1_000_000,
        // Waits until acquired: no bound.
        (false, None) => return,
    };
    let (answered, line) = match o.enter {
        Some((line, t, _)) => (t, line),
        None => (c.t, c.line),
    };
    // A process stopped by SIGSTOP keeps no time (the Freeze families stop
    // holders, after their answer; this excuses any freeze of one before).
    let stopped = frozen.iter().any(|(t, pids)| {
        (o.invoke..answered).contains(t) && c.pid.is_some_and(|p| pids.contains(&p))
    });
    let took = answered.saturating_sub(o.invoke);
    if !stopped && took > stated + nt + BOUND_SLACK_NS {
        let asked = match o.wait_ms {
            Some(ms) if !o.no_wait => format!("--wait {ms}ms"),
            _ => "-n".to_owned(),
        };
        out.push(Violation {
            kind: "bound",
            message: format!(
                "{}: {} {asked} answered after {} ms (exit {:?}); stated {} ms, allowed {} ms \
                 with a node timeout and the slack",
                o.key,
                o.f,
                took / 1_000_000,
                c.code,
                stated / 1_000_000,
                (stated + nt + BOUND_SLACK_NS) / 1_000_000
            ),
            lines: vec![o.line, line],
        });
    }
}

/// When `o` possibly held its key without a section to show it: an
/// `acquire` from its invocation to a TTL past its end, and a `run` that
/// was stopped or ended with neither its command's code nor a refusal (it
/// may have been granted and died before its command ran, or kept a grant
/// its command outlived), for its TTL past its end.
fn possible_hold(o: &Op) -> Option<(u64, u64)> {
    let ttl = o.ttl_ms * 1_000_000;
    let end = o.complete.as_ref().map_or(u64::MAX, |c| c.t.saturating_add(ttl));
    let code = o.complete.as_ref().and_then(|c| c.code);
    let abnormal = match o.f.as_str() {
        "run" => {
            let refused = code == Some(75) || code == o.busy_code;
            let elsewhere = o.other_schedule && code == Some(64);
            o.exit.as_ref().is_some_and(|e| e.2 != "normal")
                || !(code == o.child_code || refused || elsewhere)
        }
        "acquire" => true,
        _ => false,
    };
    abnormal.then_some((o.invoke, end))
}

/// How far the wall clock (ms) and `CLOCK_MONOTONIC` may move apart over a
/// run (a slewed wall clock), in ms.
const WALL_SLACK_MS: u64 = 50;

/// A host fired this close (ms) to its tick's end may read the next tick
/// when redlock starts: it counts for no tick in the "exactly once" check.
const TICK_EDGE_MS: u64 = 500;

/// The longest TTL of the campaign (`--max-ttl 2s`), in ns: a fault this
/// long before a tick may still hold its key.
const LONGEST_TTL_NS: u64 = 2_000_000_000;

/// How long after its tick's end a `--once-per` grant may still come, in
/// ms: the clock allowance between a host and the servers (900 ms,
/// `CLOCK_ALLOWANCE` in src/lock/vote.rs), rounded up.
const TICK_ALLOWANCE_MS: u64 = 1_000;

/// How long after its tick ended the section of `o` (labelled with that
/// tick, `every` ms long) began, in ms, when that is later than a grant
/// within [`TICK_ALLOWANCE_MS`] of the end explains: the grant's last node
/// timeout (the fence round) and [`BOUND_SLACK_NS`] (the command's start
/// before its stamp) come on top. The entry's wall time is read through
/// the invocation's stamps, early by the clocks' slack. A host that
/// computed its tick and was then held up past the tick's end (a freeze
/// during its `--jitter`, a starved machine) must skip that tick.
fn tick_late(o: &Op, every: u64, entered: u64) -> Option<u64> {
    let label = o.tick_label.flatten()?;
    let end = (label / every + 1) * every;
    let entered_wall =
        (o.wall_ms + entered.saturating_sub(o.invoke) / 1_000_000).saturating_sub(WALL_SLACK_MS);
    let allowed = TICK_ALLOWANCE_MS + (node_timeout_ns(o) + BOUND_SLACK_NS).div_ceil(1_000_000);
    let late = entered_wall.saturating_sub(end);
    (late > allowed).then_some(late)
}

/// The cron fleet's ticks (see the module doc). Returns how many ticks
/// some `--once-per` host was fired for, and how many of them were quiet.
fn ticks(
    ops: &BTreeMap<u64, Op>,
    holds: &BTreeMap<String, Vec<Hold>>,
    foreign: &[Foreign],
    faults: &[(u64, u64)],
    out: &mut Vec<Violation>,
) -> (usize, usize) {
    let fleet: Vec<(&Op, u64)> = ops
        .values()
        .filter(|o| o.f == "run")
        .filter_map(|o| o.every_ms.filter(|e| *e > 0).map(|e| (o, e)))
        .collect();
    // Every section of the fleet, by the tick it ran for.
    let mut ran: BTreeMap<(&str, u64), Vec<&Op>> = BTreeMap::new();
    for &(o, every) in &fleet {
        let Some((enter_line, entered, _)) = o.enter else { continue };
        let fired = o.wall_ms / every;
        let tick = match o.tick_label {
            None => fired,
            Some(label) => {
                // Entered at this wall time, less the clocks' slack.
                let entered_wall =
                    o.wall_ms + entered.saturating_sub(o.invoke) / 1_000_000 + WALL_SLACK_MS;
                let tick = label.map(|ms| ms / every);
                if tick.is_none_or(|t| t < fired || t > entered_wall / every) {
                    out.push(Violation {
                        kind: "tick-label",
                        message: format!(
                            "{}: REDLOCK_TICK is tick {tick:?}, but the host was fired in tick \
                             {fired} and entered by tick {}",
                            o.key,
                            entered_wall / every
                        ),
                        lines: vec![o.line, enter_line],
                    });
                }
                if o.once_per
                    && let Some(late) = tick_late(o, every, entered)
                {
                    out.push(Violation {
                        kind: "tick-late",
                        message: format!(
                            "{}: a section of tick {} began {late} ms after the tick ended",
                            o.key,
                            tick.unwrap_or(fired)
                        ),
                        lines: vec![o.line, enter_line],
                    });
                }
                tick.unwrap_or(fired)
            }
        };
        ran.entry((o.key.as_str(), tick)).or_default().push(o);
    }
    for ((key, tick), list) in &ran {
        if list.len() > 1 {
            out.push(Violation {
                kind: "tick-twice",
                message: format!("{key}: tick {tick} ran {} times", list.len()),
                lines: list.iter().flat_map(|o| [o.line, o.enter.map_or(0, |e| e.0)]).collect(),
            });
        }
    }
    // The `--once-per` hosts fired for each tick, away from its end.
    let mut fired: BTreeMap<(&str, u64), Vec<(&Op, u64)>> = BTreeMap::new();
    for &(o, every) in fleet.iter().filter(|(o, _)| o.once_per) {
        if o.wall_ms % every + TICK_EDGE_MS < every {
            fired.entry((o.key.as_str(), o.wall_ms / every)).or_default().push((o, every));
        }
    }
    let mut quiet = 0;
    for ((key, tick), hosts) in &fired {
        let (first, every) = hosts[0];
        // The tick on the monotonic clock, through the first host's stamps.
        let start = first.invoke.saturating_sub((first.wall_ms - tick * every) * 1_000_000);
        let last = hosts.iter().filter_map(|(o, _)| o.complete.as_ref().map(|c| c.t));
        let end = last.max().unwrap_or(u64::MAX).max(start + every * 1_000_000);
        let from = start.saturating_sub(LONGEST_TTL_NS);
        let faulty = faults.iter().any(|&(s, e)| s < end && e > from);
        let dead = fleet.iter().any(|&(o, e)| {
            o.once_per
                && &o.key == key
                && o.wall_ms / e == *tick
                && (o.exit.as_ref().is_some_and(|x| x.2 == "killed")
                    || o.complete.as_ref().is_none_or(|c| c.code.is_none()))
        });
        if faulty {
            continue;
        }
        quiet += 1;
        if dead || ran.contains_key(&(*key, *tick)) {
            continue;
        }
        let unexcused: Vec<&Op> = hosts
            .iter()
            .map(|(o, _)| *o)
            .filter(|o| {
                let Some(c) = &o.complete else { return false };
                if c.code != Some(o.busy_code.unwrap_or(75)) {
                    return false;
                }
                let meets = |s: u64, e: u64| s < c.t && e > o.invoke;
                let held = holds
                    .get(*key)
                    .is_some_and(|l| l.iter().any(|h| h.op != o.op && meets(h.invoke, h.end)));
                let possibly = ops.values().any(|p| {
                    &p.key == key
                        && p.op != o.op
                        && possible_hold(p).is_some_and(|(s, e)| meets(s, e))
                });
                let foreign_held = foreign.iter().any(|f| f.key == **key && meets(f.from, f.to));
                !held && !possibly && !foreign_held
            })
            .collect();
        if !unexcused.is_empty() {
            out.push(Violation {
                kind: "lost-tick",
                message: format!(
                    "{key}: tick {tick} never ran, no fault was active, and {} of its {} hosts \
                     were told busy while nothing held the key",
                    unexcused.len(),
                    hosts.len()
                ),
                lines: unexcused.iter().map(|o| o.line).collect(),
            });
        }
    }
    (fired.len(), quiet)
}

/// `-n` runs whose section began after a section or script hold of their
/// exclusive key whose operation was invoked after theirs.
fn taken_meanwhile(
    ops: &BTreeMap<u64, Op>,
    holds: &BTreeMap<String, Vec<Hold>>,
    out: &mut Vec<Violation>,
) {
    let mut exclusive: BTreeMap<&str, bool> = BTreeMap::new();
    for o in ops.values() {
        *exclusive.entry(o.key.as_str()).or_insert(true) &= o.mode == Some(Mode::Exclusive);
    }
    for r in ops.values().filter(|o| o.f == "run" && o.no_wait) {
        let Some((enter_line, entered, _)) = r.enter else { continue };
        if exclusive.get(r.key.as_str()) != Some(&true) {
            continue;
        }
        for h in holds.get(&r.key).into_iter().flatten() {
            if h.op != r.op && h.invoke > r.invoke && h.start < entered {
                out.push(Violation {
                    kind: "taken-meanwhile",
                    message: format!(
                        "{}: a -n run entered {} ms after another holder's section began, which \
                         was invoked {} ms after the -n run",
                        r.key,
                        (entered - h.start) / 1_000_000,
                        (h.invoke - r.invoke) / 1_000_000
                    ),
                    lines: [r.line, enter_line]
                        .into_iter()
                        .chain(h.lines.iter().copied())
                        .collect(),
                });
            }
        }
    }
}

/// How far a freeze's gap (wall ms, from its key's history) is widened on
/// each side when it is put on the history's clock, in ns: the two clocks'
/// slack ([`WALL_SLACK_MS`], as for an `acquire`'s fence) and the
/// millisecond the entry is rounded to. Sections are stamped inside their
/// holds, so nothing more: a section that begins or ends this close
/// outside a gap is taken as inside it (an overlap up to 51 ms goes
/// unseen).
const GAP_SLACK_NS: u64 = (WALL_SLACK_MS + 1) * 1_000_000;

/// A freeze's gap `(start, end)` in wall ms on the history's clock,
/// through the freeze's invocation stamps, widened by [`GAP_SLACK_NS`].
fn gap_ns(o: &Op, (start, end): (u64, u64)) -> (u64, u64) {
    let at = |wall: u64| {
        let ns = i128::from(o.invoke) + (i128::from(wall) - i128::from(o.wall_ms)) * 1_000_000;
        u64::try_from(ns.max(0)).unwrap_or(u64::MAX)
    };
    (at(start).saturating_sub(GAP_SLACK_NS), at(end).saturating_add(GAP_SLACK_NS))
}

/// `freeze-taken`: while a freeze holds its key, no other holder takes
/// it, except inside a gap the freeze recorded in the key's history
/// (`redlock hold`; docs/safety.md, "A freeze's gaps"): each gap runs from
/// the end of the validity the freeze lost to when it took the key back
/// (or ended), so whoever held the key in between is inside one.
///
/// The freeze's span, by its own view: from the arrival of its
/// `hold_started` line (after its grant) to the earliest of its `--for`
/// from its invocation (it counts from its own start, later), the SIGTERM
/// the campaign sent it (it releases only after), and its process's end;
/// cut where a foreign write over the key began (the write breaks
/// exclusion's premise, and the freeze then ends as released by force,
/// recording no gap). Each other holder's hold (a section, stamped inside
/// the real one, or a script's hold) that overlaps the span must lie,
/// within the span, inside one of the freeze's gaps, widened by
/// [`GAP_SLACK_NS`]. A `run` whose redlock was stopped together with its
/// command during its section (`frozen`: a stop of more than its one
/// process) is the documented bound, a paused VM: its command may outlive
/// its lock, whose validity ends anywhere in the TTL after its last
/// renewal before the stop, so its hold ends, here, where that stop began
/// (as a foreign write cuts a hold); what comes before is checked. Breaks
/// it: a loss the freeze never noticed or never
/// recorded (its end or a signal came while it was stopped past its
/// validity), or a gap that starts after the key was free or ends before
/// the freeze had it back. Returns how many gaps were checked, `None` when
/// the freeze never took the key or its gaps were not read.
fn freeze_taken(
    o: &Op,
    (ops, holds): (&BTreeMap<u64, Op>, &BTreeMap<String, Vec<Hold>>),
    foreign: &[Foreign],
    frozen: &[(u64, Vec<u32>)],
    out: &mut Vec<Violation>,
) -> Option<usize> {
    let (started, from) = o.began()?;
    let Some(Recorded { line: gaps_line, read: true, gaps }) = &o.gaps else { return None };
    let mut to = o.invoke.saturating_add(o.for_ms.unwrap_or(0) * 1_000_000);
    if let Some((_, t, _)) = o.freeze.iter().find(|(.., said)| said == "signalled") {
        to = to.min(*t);
    }
    if let Some(c) = &o.complete {
        to = to.min(c.t);
    }
    for w in foreign.iter().filter(|w| w.key == o.key && w.from > o.invoke) {
        to = to.min(w.from);
    }
    let windows: Vec<(u64, u64)> = gaps.iter().map(|g| gap_ns(o, *g)).collect();
    for h in holds.get(&o.key).into_iter().flatten() {
        let pid = ops[&h.op].complete.as_ref().and_then(|c| c.pid);
        let bound = frozen.iter().find(|(t, pids)| {
            pids.len() > 1 && pid.is_some_and(|p| pids.contains(&p)) && (h.start..h.end).contains(t)
        });
        let end = bound.map_or(h.end, |(t, _)| h.end.min(*t));
        let (s, e) = (h.start.max(from), end.min(to));
        if s >= e || windows.iter().any(|&(gs, ge)| gs <= s && e <= ge) {
            continue;
        }
        out.push(Violation {
            kind: "freeze-taken",
            message: format!(
                "{}: another holder held the key {} ms into the freeze of op {} (for {} ms, \
                 until {} ms into it) outside the {} gaps it recorded",
                o.key,
                (s - from) / 1_000_000,
                o.op,
                (e - s) / 1_000_000,
                (to - from) / 1_000_000,
                gaps.len()
            ),
            lines: [o.line, started, *gaps_line].into_iter().chain(h.lines.clone()).collect(),
        });
    }
    Some(gaps.len())
}

/// `schedule-refused`: a run of another schedule than the one its key's
/// record names (a quorum of the servers named it when the run was fired,
/// so any quorum it could win holds a server that refuses it) is refused
/// with 64 (`Error::Schedules`, skip kind `elsewhere`), on a free key and
/// while the tick's holder runs alike: it never runs its command, and
/// never exits 0 or its busy code, a silent skip as if a host of its own
/// schedule had run the tick. 69 (no quorum of the servers answered) is
/// the outage's line, which a person reads too. Breaks it: a build that
/// tells such a host "busy" while the holder runs (silent under `-E 0`).
/// Returns 1 for such a run, else 0.
fn schedule_refused(o: &Op, out: &mut Vec<Violation>) -> usize {
    if !o.other_schedule {
        return 0;
    }
    let Some(c) = &o.complete else { return 1 };
    let why = match (&o.enter, c.code) {
        (Some(_), _) => Some("ran its command".to_owned()),
        (None, Some(64 | 69) | None) => None,
        (None, Some(code)) if Some(code) == o.busy_code || code == 75 => {
            Some(format!("skipped as busy (exit {code}, its busy code), not refused"))
        }
        (None, Some(code)) => Some(format!("exited {code}, not refused")),
    };
    if let Some(why) = why {
        let lines = [o.line, c.line].into_iter().chain(o.enter.map(|e| e.0)).collect();
        out.push(Violation {
            kind: "schedule-refused",
            message: format!("{}: a run of another schedule than the key's record {why}", o.key),
            lines,
        });
    }
    1
}

/// Bursts in which every host skipped as busy while nothing held the key,
/// nor possibly held it. Returns the number of bursts.
fn lost_ticks(
    ops: &BTreeMap<u64, Op>,
    holds: &BTreeMap<String, Vec<Hold>>,
    foreign: &[Foreign],
    out: &mut Vec<Violation>,
) -> usize {
    let mut bursts: BTreeMap<u64, Vec<&Op>> = BTreeMap::new();
    for o in ops.values() {
        if let Some(b) = o.burst {
            bursts.entry(b).or_default().push(o);
        }
    }
    for members in bursts.values() {
        let ran = members.iter().any(|o| o.enter.is_some());
        let all_busy = members
            .iter()
            .all(|o| o.complete.as_ref().and_then(|c| c.code) == Some(o.busy_code.unwrap_or(75)));
        if ran || !all_busy {
            continue;
        }
        let key = &members[0].key;
        let from = members.iter().map(|o| o.invoke).min().unwrap_or(0);
        let to = members.iter().filter_map(|o| o.complete.as_ref().map(|c| c.t)).max().unwrap_or(0);
        let overlaps = |start: u64, end: u64| start < to && end > from;
        let held = holds.get(key).is_some_and(|l| l.iter().any(|h| overlaps(h.start, h.end)));
        let foreign_held = foreign.iter().any(|f| &f.key == key && overlaps(f.from, f.to));
        let possibly = ops.values().any(|o| {
            &o.key == key
                && o.burst.is_none_or(|b| Some(b) != members[0].burst)
                && possible_hold(o).is_some_and(|(s, e)| overlaps(s, e))
        });
        if !held && !foreign_held && !possibly {
            out.push(Violation {
                kind: "lost-tick",
                message: format!(
                    "{key}: a burst of {} hosts all skipped as busy, and nothing held the key",
                    members.len()
                ),
                lines: members.iter().map(|o| o.line).collect(),
            });
        }
    }
    bursts.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// The process id of op N's redlock in [`H`]'s histories: `PID + N`.
    const PID: u32 = 1000;

    /// A history builder: events get line numbers in the order added.
    #[derive(Default)]
    struct H {
        events: Vec<(usize, Event)>,
        next_op: u64,
    }

    impl H {
        fn push(&mut self, e: Event) {
            let line = self.events.len() + 1;
            self.events.push((line, e));
        }

        /// A `run` on `key` from `start` to `end` ms with its section
        /// inside, ending `how` with `code`; run's own exit `exit`.
        #[allow(clippy::too_many_arguments)]
        fn run(
            &mut self,
            key: &str,
            mode: Mode,
            (start, enter, leave, end): (u64, Option<u64>, u64, u64),
            fence: Option<u64>,
            how: &str,
            exit: i32,
            burst: Option<u64>,
        ) -> u64 {
            self.next_op += 1;
            let op = self.next_op;
            self.push(Event::Invoke {
                t: start * MS,
                client: 0,
                op,
                f: "run".into(),
                key: key.into(),
                mode,
                limit: if mode == Mode::Limit { 2 } else { 1 },
                ttl_ms: 1000,
                burst,
                child_code: Some(3),
                busy_code: burst.map(|_| 0),
                after_faults: false,
                token: None,
                no_wait: burst.is_some(),
                wait_ms: None,
                every_ms: None,
                once_per: false,
                wall_ms: 0,
                node_timeout_ms: None,
                for_ms: None,
                other_schedule: false,
            });
            if let Some(enter) = enter {
                self.push(Event::Enter {
                    t: enter * MS,
                    client: 0,
                    op,
                    fence,
                    slot: None,
                    tick: None,
                });
                let code = (how == "normal").then_some(3);
                self.push(Event::Exit { t: leave * MS, client: 0, op, how: how.into(), code });
            }
            self.push(Event::Complete {
                t: end * MS,
                client: 0,
                op,
                outcome: if exit == 0 { "ok" } else { "failed" }.into(),
                code: Some(exit),
                token: None,
                fence: None,
                validity_ms: None,
                pid: Some(PID + u32::try_from(op).unwrap()),
            });
            op
        }

        /// Makes run `op` wait `ms` (`None`: `-n`).
        fn wait(&mut self, op: u64, ms: Option<u64>) {
            for (_, e) in &mut self.events {
                if let Event::Invoke { op: o, wait_ms, no_wait, .. } = e
                    && *o == op
                {
                    *wait_ms = ms;
                    *no_wait = ms.is_none();
                }
            }
        }

        /// A host of the cron fleet (2 s ticks, the wall clock 10 s ahead
        /// of the monotonic one): fired at `start` ms with `--once-per`
        /// unless `plain`, its section from `enter` to `enter + 100` ms
        /// labelled with the tick of `label` (ms, wall), or busy.
        fn host(&mut self, start: u64, enter: Option<u64>, label: Option<u64>, plain: bool) -> u64 {
            let end = enter.map_or(start + 5, |e| e + 101);
            let exit = if enter.is_some() { 3 } else { 0 };
            let op = self.run(
                "t",
                Mode::Exclusive,
                (start, enter, end - 1, end),
                None,
                "normal",
                exit,
                None,
            );
            for (_, e) in &mut self.events {
                match e {
                    Event::Invoke {
                        op: o,
                        every_ms,
                        once_per,
                        wall_ms,
                        no_wait,
                        busy_code,
                        ..
                    } if *o == op => {
                        *every_ms = Some(2000);
                        *once_per = !plain;
                        *wall_ms = 10_000 + start;
                        *no_wait = true;
                        *busy_code = Some(0);
                    }
                    Event::Enter { op: o, tick, .. } if *o == op => {
                        *tick = label.map(|ms| {
                            let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
                            humantime::format_rfc3339_seconds(at).to_string()
                        });
                    }
                    _ => {}
                }
            }
            op
        }

        /// Sets the `REDLOCK_SLOT` of each section, in the order added.
        fn slots(&mut self, slots: &[u32]) {
            let enters = self.events.iter_mut().filter_map(|(_, e)| match e {
                Event::Enter { slot, .. } => Some(slot),
                _ => None,
            });
            for (slot, &s) in enters.zip(slots) {
                *slot = Some(s);
            }
        }

        fn fault(&mut self, from: u64, to: u64) {
            for (t, phase) in [(from, "start"), (to, "stop")] {
                self.push(Event::Nemesis {
                    t: t * MS,
                    what: "pause".into(),
                    phase: phase.into(),
                    foreign: None,
                    servers: Vec::new(),
                    fleet: 0,
                    frozen: Vec::new(),
                });
            }
        }

        /// A foreign write over `key` at `at` ms on `servers` of 3, for
        /// `ms`, stopped (its last `SET` done) 1 ms later.
        fn foreign(&mut self, key: &str, at: u64, ms: u64, servers: &[usize]) {
            let what = format!("foreign write over {key} on servers {servers:?} for {ms}ms");
            self.push(Event::Nemesis {
                t: at * MS,
                what: what.clone(),
                phase: "start".into(),
                foreign: Some((key.into(), ms)),
                servers: servers.to_vec(),
                fleet: 3,
                frozen: Vec::new(),
            });
            self.push(Event::Nemesis {
                t: (at + 1) * MS,
                what,
                phase: "stop".into(),
                foreign: None,
                servers: Vec::new(),
                fleet: 0,
                frozen: Vec::new(),
            });
        }

        /// An `acquire` of `key` (TTL 1 s) invoked at `start` ms (the
        /// wall clock 10 s ahead of the monotonic one) that printed `fence`
        /// and `validity_ms` at `end` ms, and a `release` at `release` ms.
        fn acquire(
            &mut self,
            key: &str,
            (start, end, release): (u64, u64, u64),
            fence: Option<u64>,
            validity_ms: Option<u64>,
        ) {
            self.next_op += 1;
            let op = self.next_op;
            let token = format!("T{op}");
            for (f, t, token_in) in [("acquire", start, None), ("release", release, Some(&token))] {
                let o = if f == "acquire" { op } else { op + 1000 };
                self.push(Event::Invoke {
                    t: t * MS,
                    client: 0,
                    op: o,
                    f: f.into(),
                    key: key.into(),
                    mode: Mode::Exclusive,
                    limit: 1,
                    ttl_ms: 1000,
                    burst: None,
                    child_code: None,
                    busy_code: None,
                    after_faults: false,
                    token: token_in.cloned(),
                    no_wait: false,
                    wait_ms: Some(2000).filter(|_| f == "acquire"),
                    every_ms: None,
                    once_per: false,
                    wall_ms: 10_000 + t,
                    node_timeout_ms: None,
                    for_ms: None,
                    other_schedule: false,
                });
                let acquired = f == "acquire";
                self.push(Event::Complete {
                    t: if acquired { end * MS } else { (release + 1) * MS },
                    client: 0,
                    op: o,
                    outcome: "ok".into(),
                    code: Some(0),
                    token: acquired.then(|| token.clone()),
                    fence: fence.filter(|_| acquired),
                    validity_ms: validity_ms.filter(|_| acquired),
                    pid: Some(PID + u32::try_from(o).unwrap()),
                });
            }
        }

        /// A freeze of `key` (`hold --for for_ms`, TTL 2 s) invoked at
        /// `start` ms (the wall clock 10 s ahead of the monotonic one), that
        /// said it froze the key at `started` ms and ended at `end` ms,
        /// sent SIGTERM at `signalled` ms, with the gaps (wall ms) its
        /// key's history showed, when it could be read.
        fn freeze(
            &mut self,
            (start, started, end): (u64, u64, u64),
            for_ms: u64,
            signalled: Option<u64>,
            gaps: Option<&[(u64, u64)]>,
        ) -> u64 {
            self.next_op += 1;
            let op = self.next_op;
            self.push(Event::Invoke {
                t: start * MS,
                client: 0,
                op,
                f: "hold".into(),
                key: "x".into(),
                mode: Mode::Exclusive,
                limit: 1,
                ttl_ms: 2000,
                burst: None,
                child_code: None,
                busy_code: None,
                after_faults: false,
                token: None,
                no_wait: false,
                wait_ms: None,
                every_ms: None,
                once_per: false,
                wall_ms: 10_000 + start,
                node_timeout_ms: None,
                for_ms: Some(for_ms),
                other_schedule: false,
            });
            let said = [(Some(started), "hold_started"), (signalled, "signalled")];
            for (t, said) in said.into_iter().filter_map(|(t, s)| Some((t?, s))) {
                self.push(Event::Freeze { t: t * MS, op, said: said.into() });
            }
            self.push(Event::Complete {
                t: end * MS,
                client: 0,
                op,
                outcome: "ok".into(),
                code: Some(0),
                token: None,
                fence: None,
                validity_ms: None,
                pid: Some(PID + u32::try_from(op).unwrap()),
            });
            let (read, gaps) = gaps.map_or((false, Vec::new()), |g| (true, g.to_vec()));
            self.push(Event::Gaps { t: (end + 10) * MS, op, read, gaps });
            op
        }

        /// Makes run `op` one of another schedule than its key's record.
        fn other_schedule(&mut self, op: u64) {
            for (_, e) in &mut self.events {
                if let Event::Invoke { op: o, other_schedule, .. } = e
                    && *o == op
                {
                    *other_schedule = true;
                }
            }
        }

        fn check(mut self) -> Vec<Violation> {
            self.events.sort_by_key(|(i, e)| (e.t(), *i));
            check(&self.events).violations
        }
    }

    fn kinds(v: &[Violation]) -> Vec<&'static str> {
        v.iter().map(|v| v.kind).collect()
    }

    #[test]
    fn a_clean_history_has_no_violation() {
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(1), 10, 11), Some(1), "normal", 3, None);
        h.run("k", Mode::Exclusive, (5, Some(10), 20, 21), Some(2), "normal", 3, None);
        h.run("k", Mode::Exclusive, (6, None, 0, 7), None, "normal", 75, None);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn two_exclusive_sections_at_once_overlap() {
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(1), 10, 11), Some(1), "normal", 3, None);
        h.run("k", Mode::Exclusive, (2, Some(9), 20, 21), Some(2), "normal", 3, None);
        let v = h.check();
        assert_eq!(kinds(&v), ["overlap"]);
        assert_eq!(v[0].lines, [1, 2, 3, 5, 6, 7], "the lines of both sections");
    }

    #[test]
    fn a_limit_allows_n_and_no_more() {
        let mut h = H::default();
        h.run("k", Mode::Limit, (0, Some(1), 10, 11), Some(1), "normal", 3, None);
        h.run("k", Mode::Limit, (0, Some(2), 10, 11), Some(1), "normal", 3, None);
        assert_eq!(h.check(), vec![]);
        let mut h = H::default();
        for _ in 0..3 {
            h.run("k", Mode::Limit, (0, Some(1), 10, 11), None, "normal", 3, None);
        }
        assert_eq!(kinds(&h.check()), ["overlap"]);
    }

    #[test]
    fn a_writer_beside_a_reader_overlaps_but_readers_do_not() {
        let mut h = H::default();
        h.run("k", Mode::Shared, (0, Some(1), 10, 11), None, "normal", 3, None);
        h.run("k", Mode::Shared, (0, Some(2), 10, 11), None, "normal", 3, None);
        assert_eq!(h.check(), vec![]);
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(5), 15, 16), None, "normal", 3, None);
        h.run("k", Mode::Shared, (0, Some(1), 10, 11), None, "normal", 3, None);
        assert_eq!(kinds(&h.check()), ["overlap"]);
    }

    #[test]
    fn fences_must_increase_in_real_time_order() {
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(1), 10, 11), Some(5), "normal", 3, None);
        h.run("k", Mode::Exclusive, (11, Some(12), 20, 21), Some(5), "normal", 3, None);
        h.run("k", Mode::Exclusive, (21, Some(22), 30, 31), Some(4), "normal", 3, None);
        assert_eq!(kinds(&h.check()), ["fence", "fence"]);
    }

    #[test]
    fn readers_and_places_are_ordered_by_fence_only_after_writers() {
        // A reader granted first whose command began after another
        // reader's ended: both held at once, which readers may.
        let mut h = H::default();
        h.run("k", Mode::Shared, (0, Some(60), 70, 71), Some(1), "normal", 3, None);
        h.run("k", Mode::Shared, (5, Some(20), 40, 41), Some(2), "normal", 3, None);
        assert_eq!(h.check(), vec![]);
        // The same with two places of a `--limit` key; one place is
        // ordered.
        let mut h = H::default();
        h.run("k", Mode::Limit, (0, Some(60), 70, 71), Some(1), "normal", 3, None);
        h.run("k", Mode::Limit, (5, Some(20), 40, 41), Some(2), "normal", 3, None);
        h.slots(&[1, 2]);
        assert_eq!(h.check(), vec![]);
        let mut h = H::default();
        h.run("k", Mode::Limit, (0, Some(60), 70, 71), Some(1), "normal", 3, None);
        h.run("k", Mode::Limit, (5, Some(20), 40, 41), Some(2), "normal", 3, None);
        h.slots(&[1, 1]);
        assert_eq!(kinds(&h.check()), ["fence"]);
        // A writer's hold, ended before a reader began, orders them.
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(1), 10, 11), Some(5), "normal", 3, None);
        h.run("k", Mode::Shared, (11, Some(12), 20, 21), Some(4), "normal", 3, None);
        assert_eq!(kinds(&h.check()), ["fence"]);
    }

    #[test]
    fn exit_codes_must_tell_what_the_command_did() {
        let mut h = H::default();
        // Ran and exited 3, but run said 0.
        h.run("a", Mode::Exclusive, (0, Some(1), 2, 3), None, "normal", 0, None);
        // Stopped by SIGTERM, run said 3.
        h.run("b", Mode::Exclusive, (0, Some(1), 2, 3), None, "term", 3, None);
        // Never ran, run said 3 (the command's code).
        h.run("c", Mode::Exclusive, (0, None, 0, 3), None, "normal", 3, None);
        // Never ran, an undocumented code.
        h.run("d", Mode::Exclusive, (0, None, 0, 3), None, "normal", 101, None);
        // Stopped as lost: 70 is right.
        h.run("e", Mode::Exclusive, (0, Some(1), 2, 3), None, "killed", 70, None);
        assert_eq!(kinds(&h.check()), ["exit-status"; 4]);
    }

    #[test]
    fn a_burst_that_all_skipped_on_a_free_key_lost_its_tick() {
        let mut h = H::default();
        for _ in 0..3 {
            h.run("k", Mode::Exclusive, (100, None, 0, 101), None, "normal", 0, Some(1));
        }
        assert_eq!(kinds(&h.check()), ["lost-tick"]);
        // Held by a section at the time: the skips were right.
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(1), 200, 201), None, "normal", 3, None);
        for _ in 0..3 {
            h.run("k", Mode::Exclusive, (100, None, 0, 101), None, "normal", 0, Some(1));
        }
        assert_eq!(h.check(), vec![]);
        // One of them ran: no tick lost.
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (100, Some(101), 102, 103), None, "normal", 3, Some(1));
        h.run("k", Mode::Exclusive, (100, None, 0, 101), None, "normal", 0, Some(1));
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn a_waiter_after_the_faults_must_get_in() {
        let mut h = H::default();
        let op = h.run("k", Mode::Exclusive, (0, None, 0, 30), None, "normal", 75, None);
        for (_, e) in &mut h.events {
            if let Event::Invoke { op: o, after_faults, .. } = e
                && *o == op
            {
                *after_faults = true;
            }
        }
        assert_eq!(kinds(&h.check()), ["liveness"]);
    }

    #[test]
    fn a_script_hold_lasts_until_its_release_or_its_validity() {
        let mut events = Vec::new();
        let mut line = 0;
        let mut push = |e: Event| {
            line += 1;
            events.push((line, e));
        };
        let invoke = |t: u64, op: u64, f: &str, token: Option<&str>| Event::Invoke {
            t: t * MS,
            client: 0,
            op,
            f: f.into(),
            key: "k".into(),
            mode: Mode::Exclusive,
            limit: 1,
            ttl_ms: 1000,
            burst: None,
            child_code: None,
            busy_code: None,
            after_faults: false,
            token: token.map(str::to_owned),
            no_wait: false,
            wait_ms: None,
            every_ms: None,
            once_per: false,
            wall_ms: 0,
            node_timeout_ms: None,
            for_ms: None,
            other_schedule: false,
        };
        let done = |t: u64, op: u64, token: Option<&str>| Event::Complete {
            t: t * MS,
            client: 0,
            op,
            outcome: "ok".into(),
            code: Some(0),
            token: token.map(str::to_owned),
            fence: None,
            validity_ms: None,
            pid: None,
        };
        push(invoke(0, 1, "acquire", None));
        push(done(5, 1, Some("T")));
        push(invoke(500, 2, "release", Some("T")));
        push(done(501, 2, None));
        // A run inside the hold: an overlap. One after the validity of a
        // hold never released: none.
        push(invoke(100, 3, "run", None));
        push(Event::Enter { t: 200 * MS, client: 1, op: 3, fence: None, slot: None, tick: None });
        push(Event::Exit { t: 300 * MS, client: 1, op: 3, how: "normal".into(), code: Some(0) });
        push(Event::Complete {
            t: 301 * MS,
            client: 1,
            op: 3,
            outcome: "ok".into(),
            code: Some(0),
            token: None,
            fence: None,
            validity_ms: None,
            pid: None,
        });
        let sorted = |mut events: Vec<(usize, Event)>| {
            events.sort_by_key(|(i, e): &(usize, Event)| (e.t(), *i));
            events
        };
        assert_eq!(kinds(&check(&sorted(events.clone())).violations), ["overlap"]);
        // A foreign write over the key at 50 ms ends the hold: the run is
        // no overlap; but an extend of the token that succeeds after the
        // write is a holder that did not notice.
        let mut line = events.len();
        let mut push = |events: &mut Vec<(usize, Event)>, e: Event| {
            line += 1;
            events.push((line, e));
        };
        push(
            &mut events,
            Event::Nemesis {
                t: 50 * MS,
                what: "foreign write".into(),
                phase: "start".into(),
                foreign: Some(("k".into(), 100)),
                servers: Vec::new(),
                fleet: 0,
                frozen: Vec::new(),
            },
        );
        assert_eq!(check(&sorted(events.clone())).violations, vec![]);
        push(&mut events, invoke(400, 4, "extend", Some("T")));
        push(&mut events, done(401, 4, None));
        assert_eq!(kinds(&check(&sorted(events)).violations), ["foreign-unnoticed"]);
    }

    /// Two foreign writes over a majority each, the second over one of the
    /// first's servers with a shorter TTL: from the second's expiry a
    /// quorum is free, and two holders granted then really overlap, though
    /// the first value still sits on one server.
    #[test]
    fn a_foreign_write_shortened_by_another_frees_a_quorum_early() {
        let sections = |h: &mut H| {
            h.run("k", Mode::Exclusive, (50, Some(600), 900, 901), Some(1), "normal", 3, None);
            h.run("k", Mode::Exclusive, (60, Some(700), 1_000, 1_001), Some(2), "normal", 3, None);
        };
        // Server 1's value of the first write (100 ms to 1600 ms) is
        // replaced by the second's (200 ms to 500 ms): servers 1 and 2 are
        // free from 500 ms.
        let mut h = H::default();
        sections(&mut h);
        h.foreign("k", 100, 1_500, &[0, 1]);
        h.foreign("k", 200, 300, &[1, 2]);
        assert_eq!(kinds(&h.check()), ["overlap"]);
        // The second value lasts until 1000 ms: no quorum is free before,
        // and the sections, begun before that, were granted before the
        // first write (their holders must notice: they did, within a TTL).
        let mut h = H::default();
        sections(&mut h);
        h.foreign("k", 100, 1_500, &[0, 1]);
        h.foreign("k", 200, 800, &[1, 2]);
        assert_eq!(h.check(), vec![]);
    }

    /// An `acquire`'s validity runs from its winning round's start, which
    /// its invocation bounds from below, and so does its fence less the
    /// window when it waited; not from its completion.
    #[test]
    fn an_acquire_is_valid_from_its_round_not_its_completion() {
        let run = |h: &mut H, from: u64, to: u64| {
            let fence = Some(90_000_000);
            h.run(
                "k",
                Mode::Exclusive,
                (from - 10, Some(from), to, to + 1),
                fence,
                "normal",
                3,
                None,
            );
        };
        // Invoked at 0, answered at 600 ms (a slow exit), no fence: valid
        // until 988 ms, so a section at 1200 ms is no overlap.
        let mut h = H::default();
        h.acquire("k", (0, 600, 5_000), None, None);
        run(&mut h, 1_200, 1_300);
        assert_eq!(h.check(), vec![]);
        // Waited 1.5 s: the fence (its server's clock at the grant, 11.55 s
        // wall, plus half the window) and a validity of 980 ms make it held
        // until 2380 ms at least: a section at 2000 ms overlaps.
        let mut h = H::default();
        h.acquire("k", (0, 1_510, 5_000), Some(11_550_000), Some(980));
        run(&mut h, 2_000, 2_100);
        assert_eq!(kinds(&h.check()), ["overlap"]);
        // The same fence drawn by a server 60 s ahead bounds nothing: only
        // the invocation counts.
        let mut h = H::default();
        h.acquire("k", (0, 1_510, 5_000), Some(71_550_000), Some(980));
        run(&mut h, 2_000, 2_100);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn a_foreign_write_ends_the_holds_it_meets_and_their_holders_must_notice() {
        let foreign = |h: &mut H, at: u64, ms: u64| {
            h.push(Event::Nemesis {
                t: at * MS,
                what: "foreign write".into(),
                phase: "start".into(),
                foreign: Some(("k".into(), ms)),
                servers: Vec::new(),
                fleet: 0,
                frozen: Vec::new(),
            });
        };
        // A run (TTL 1 s) that the write met at 100 ms, stopped at 900 ms,
        // and a newcomer granted when the foreign value expired (600 ms):
        // no overlap.
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(10), 900, 901), Some(1), "signal", 70, None);
        h.run("k", Mode::Exclusive, (50, Some(650), 700, 701), Some(2), "normal", 3, None);
        foreign(&mut h, 100, 500);
        assert_eq!(h.check(), vec![], "the write broke the first hold");
        // Without the write, the same sections overlap.
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(10), 900, 901), Some(1), "signal", 70, None);
        h.run("k", Mode::Exclusive, (50, Some(650), 700, 701), Some(2), "normal", 3, None);
        assert_eq!(kinds(&h.check()), ["overlap"]);
        // A section that began after the write, granted before it: it
        // holds nothing, but is still ordered by its fence.
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(150), 900, 901), Some(5), "signal", 70, None);
        h.run("k", Mode::Exclusive, (50, Some(650), 700, 701), Some(6), "normal", 3, None);
        foreign(&mut h, 100, 500);
        assert_eq!(h.check(), vec![]);
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(150), 900, 901), Some(5), "signal", 70, None);
        h.run("k", Mode::Exclusive, (50, Some(650), 700, 701), Some(4), "normal", 3, None);
        foreign(&mut h, 100, 500);
        assert_eq!(kinds(&h.check()), ["fence"]);
        // A section granted after the foreign value expired is not cut.
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(700), 900, 901), Some(1), "normal", 3, None);
        h.run("k", Mode::Exclusive, (50, Some(800), 850, 851), Some(2), "normal", 3, None);
        foreign(&mut h, 100, 500);
        assert_eq!(kinds(&h.check()), ["overlap"]);
        // A run whose section went on 2.5 s after the write (TTL 1 s, 1 s
        // of slack): it never noticed.
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(10), 2_600, 2_601), Some(1), "normal", 3, None);
        foreign(&mut h, 100, 500);
        assert_eq!(kinds(&h.check()), ["foreign-unnoticed"]);
    }

    #[test]
    fn dash_n_is_unavailable_only_near_a_fault() {
        let mut h = H::default();
        let quiet =
            h.run("k", Mode::Exclusive, (10_000, None, 0, 10_300), None, "normal", 69, None);
        h.wait(quiet, None);
        assert_eq!(kinds(&h.check()), ["unavailable-quiet"]);
        // A fault that stopped 3 s before it began, or one during it: excused.
        for (from, to) in [(5_000, 7_000), (10_100, 10_200)] {
            let mut h = H::default();
            let op =
                h.run("k", Mode::Exclusive, (10_000, None, 0, 10_300), None, "normal", 69, None);
            h.wait(op, None);
            h.fault(from, to);
            assert_eq!(h.check(), vec![], "fault {from}-{to}");
        }
        // A --wait that ran out on slow servers says what its last attempt saw.
        let mut h = H::default();
        let op = h.run("k", Mode::Exclusive, (10_000, None, 0, 10_300), None, "normal", 69, None);
        h.wait(op, Some(200));
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn a_tick_runs_at_most_once() {
        // Tick 6 (wall 12 s to 14 s, monotonic 2 s to 4 s): two hosts ran it.
        let mut h = H::default();
        h.host(2_000, Some(2_010), Some(12_000), false);
        h.host(2_500, Some(2_600), Some(12_000), false);
        h.host(2_700, None, None, false);
        assert_eq!(kinds(&h.check()), ["tick-twice"]);
        // One a tick: clean, a late host of tick 6 running tick 7 included.
        let mut h = H::default();
        h.host(2_000, Some(2_010), Some(12_000), false);
        h.host(3_900, Some(4_010), Some(14_000), false);
        h.host(4_100, None, None, false);
        assert_eq!(h.check(), vec![]);
        // The old recipe: no label, the tick the host was fired in.
        let mut h = H::default();
        h.host(2_000, Some(2_010), None, true);
        h.host(3_000, Some(3_010), None, true);
        assert_eq!(kinds(&h.check()), ["tick-twice"]);
    }

    /// A host of tick 6 (12 s to 14 s on the wall clock) frozen past the
    /// tick's end: its section 2.5 s after the end is late (1 s of clock
    /// allowance, a node timeout and 1 s of slack allowed); 0.1 s after is
    /// not.
    #[test]
    fn a_tick_runs_before_it_ends_give_or_take_the_clock_allowance() {
        let mut h = H::default();
        h.host(2_000, Some(6_500), Some(12_000), false);
        let v = h.check();
        assert_eq!(kinds(&v), ["tick-late"], "{v:#?}");
        assert!(v[0].message.contains("began 2450 ms after the tick ended"), "{}", v[0].message);
        let mut h = H::default();
        h.host(2_000, Some(4_100), Some(12_000), false);
        assert_eq!(h.check(), vec![]);
        // The old recipe promises no tick: a late plain host is no matter.
        let mut h = H::default();
        h.host(2_000, Some(6_500), None, true);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn a_host_that_skipped_its_tick_says_nothing_but_an_outage() {
        let said = |stderr: &str, quiet: bool| {
            let mut h = H::default();
            h.host(4_100, Some(4_110), Some(14_000), false);
            let op = h.host(4_300, None, None, false);
            h.push(Event::Said { t: 4_310 * 1_000_000, op, quiet, stderr: stderr.to_owned() });
            kinds(&h.check())
        };
        let waiting = "redlock: waiting for t (at most 46.7s more): t is held by web-07\n";
        assert_eq!(said(waiting, true), ["loud-skip"]);
        assert_eq!(said(waiting, false), Vec::<&str>::new(), "a host with -v may say it");
        assert_eq!(said("", true), Vec::<&str>::new());
        let outage = "redlock: the servers are unavailable, retrying (at most 1.9s more): ...\n";
        assert_eq!(said(outage, true), Vec::<&str>::new(), "an outage is said");
    }

    #[test]
    fn a_tick_label_lies_between_the_firing_and_the_entry() {
        let mut h = H::default();
        h.host(2_000, Some(2_010), Some(10_000), false);
        assert_eq!(kinds(&h.check()), ["tick-label"]);
        let mut h = H::default();
        h.host(2_000, Some(2_010), Some(16_000), false);
        assert_eq!(kinds(&h.check()), ["tick-label"]);
    }

    #[test]
    fn a_quiet_tick_that_never_ran_is_lost_unless_a_fault_or_a_holder_explains_it() {
        let mut h = H::default();
        h.host(4_100, Some(4_110), Some(14_000), false);
        h.host(6_000, None, None, false);
        h.host(6_300, None, None, false);
        assert_eq!(kinds(&h.check()), ["lost-tick"]);
        // A fault within a longest TTL before the tick: not checked.
        let mut h = H::default();
        h.host(6_000, None, None, false);
        h.fault(4_500, 5_000);
        assert_eq!(h.check(), vec![]);
        // A holder when the host was told busy: excused.
        let mut h = H::default();
        h.run("t", Mode::Exclusive, (5_000, Some(5_900), 6_100, 6_110), None, "normal", 3, None);
        h.host(6_000, None, None, false);
        assert_eq!(h.check(), vec![]);
        // A host fired near the tick's end may read the next tick: not counted.
        let mut h = H::default();
        h.host(7_700, None, None, false);
        assert_eq!(h.check(), vec![]);
    }

    #[test]
    fn a_dash_n_run_never_enters_after_a_holder_it_began_before() {
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (0, Some(300), 400, 401), None, "normal", 3, Some(1));
        h.run("k", Mode::Exclusive, (10, Some(20), 200, 201), None, "normal", 3, None);
        assert_eq!(kinds(&h.check()), ["taken-meanwhile"]);
        // The other holder began first: its section before ours is no taking.
        let mut h = H::default();
        h.run("k", Mode::Exclusive, (10, Some(300), 400, 401), None, "normal", 3, Some(1));
        h.run("k", Mode::Exclusive, (0, Some(20), 200, 201), None, "normal", 3, None);
        assert_eq!(h.check(), vec![]);
    }

    /// The negative control of the bound check: answers that overran their
    /// stated bound are flagged, those within it (with a node timeout and
    /// the slack: 100 ms and 1 s at a TTL of 1 s) are not, and a frozen
    /// redlock is excused.
    #[test]
    fn an_answer_later_than_its_stated_bound_is_flagged() {
        let mut h = H::default();
        // --wait 1s: refused after 2 s (allowed 2.1 s), and after 2.5 s.
        let within = h.run("a", Mode::Exclusive, (0, None, 0, 2_000), None, "normal", 75, None);
        h.wait(within, Some(1_000));
        let late = h.run("b", Mode::Exclusive, (0, None, 0, 2_500), None, "normal", 75, None);
        h.wait(late, Some(1_000));
        // --wait 1s: the command entered after 3 s, though it ended sooner
        // than the refusal: the answer is the grant, not the exit.
        let entered =
            h.run("c", Mode::Exclusive, (0, Some(3_000), 3_010, 3_020), None, "normal", 3, None);
        h.wait(entered, Some(1_000));
        // -n: 7.2 s allowed (6 s, two node timeouts, the slack).
        let n_within = h.run("d", Mode::Exclusive, (0, None, 0, 7_100), None, "normal", 75, None);
        h.wait(n_within, None);
        let n_late = h.run("e", Mode::Exclusive, (0, None, 0, 8_000), None, "normal", 75, None);
        h.wait(n_late, None);
        let v = h.check();
        assert_eq!(kinds(&v), ["bound"; 3], "{v:#?}");
        assert_eq!(v[0].lines, [3, 4], "the invocation and the answer");
        assert!(v[2].message.contains("-n answered after 8000 ms"), "{}", v[2].message);
        // Frozen before it answered: excused; frozen before it began (the
        // same pid, another process): not.
        for (at, flagged) in [(500, 0), (0, 1)] {
            let mut h = H::default();
            let op = h.run("b", Mode::Exclusive, (100, None, 0, 2_600), None, "normal", 75, None);
            h.wait(op, Some(1_000));
            h.push(Event::Nemesis {
                t: at * MS,
                what: "freeze".into(),
                phase: "start".into(),
                foreign: None,
                servers: Vec::new(),
                fleet: 0,
                frozen: vec![PID + u32::try_from(op).unwrap()],
            });
            assert_eq!(h.check().len(), flagged, "frozen at {at} ms");
        }
    }

    /// The negative control of `freeze-taken`: a freeze (invoked at 0,
    /// holding from 100 ms, `--for` 3 s: until 3000 ms) and a section of
    /// another holder from 1000 to 1200 ms. Outside every gap it recorded
    /// (none, or one that ends too soon) it is flagged; inside one it is
    /// not; nor after the freeze's span, nor when the gaps are unknown.
    #[test]
    fn a_freeze_is_taken_only_inside_a_gap_it_recorded() {
        let section = |h: &mut H, from: u64, to: u64| {
            h.run(
                "x",
                Mode::Exclusive,
                (from - 50, Some(from), to, to + 1),
                None,
                "normal",
                3,
                None,
            );
        };
        let taken =
            |gaps: Option<&[(u64, u64)]>, signalled: Option<u64>, (from, to): (u64, u64)| {
                let mut h = H::default();
                h.freeze((0, 100, 3_200), 3_000, signalled, gaps);
                section(&mut h, from, to);
                kinds(&h.check())
            };
        // No gap recorded: a loss it never noticed.
        let v = {
            let mut h = H::default();
            h.freeze((0, 100, 3_200), 3_000, None, Some(&[]));
            section(&mut h, 1_000, 1_200);
            h.check()
        };
        assert_eq!(kinds(&v), ["freeze-taken"], "{v:#?}");
        assert!(
            v[0].message.contains("900 ms into the freeze of op 1 (for 200 ms"),
            "{}",
            v[0].message
        );
        assert_eq!(v[0].lines, [1, 2, 4, 5, 6, 7], "the freeze's lines, then the section's");
        // A gap (wall 10.9 s to 11.3 s: 900 to 1300 ms) covers it; one
        // that ended at 1100 ms does not; the slack (51 ms) covers a gap
        // that began 40 ms late, not one 100 ms late.
        assert_eq!(taken(Some(&[(10_900, 11_300)]), None, (1_000, 1_200)), Vec::<&str>::new());
        assert_eq!(taken(Some(&[(10_900, 11_100)]), None, (1_000, 1_200)), ["freeze-taken"]);
        assert_eq!(taken(Some(&[(11_040, 11_300)]), None, (1_000, 1_200)), Vec::<&str>::new());
        assert_eq!(taken(Some(&[(11_100, 11_300)]), None, (1_000, 1_200)), ["freeze-taken"]);
        // Two gaps: the section lies in the second.
        let two = [(10_300, 10_500), (10_950, 11_250)];
        assert_eq!(taken(Some(&two), None, (1_000, 1_200)), Vec::<&str>::new());
        // After its --for (3000 ms), or after its SIGTERM (900 ms): its
        // span is over, whatever it recorded.
        assert_eq!(taken(Some(&[]), None, (3_050, 3_150)), Vec::<&str>::new());
        assert_eq!(taken(Some(&[]), Some(900), (1_000, 1_200)), Vec::<&str>::new());
        // Begun in the last gap, which lasted until the freeze's end, and
        // held past it: inside, within the span.
        assert_eq!(taken(Some(&[(12_500, 13_050)]), None, (2_600, 3_500)), Vec::<&str>::new());
        // The history could not be read: not checked, and counted.
        let mut h = H::default();
        h.freeze((0, 100, 3_200), 3_000, None, None);
        section(&mut h, 1_000, 1_200);
        h.events.sort_by_key(|(i, e)| (e.t(), *i));
        let summary = check(&h.events);
        assert_eq!((summary.violations.len(), summary.unread_freezes), (0, 1));
        // A foreign write over the key at 800 ms ends the span there.
        let mut h = H::default();
        h.freeze((0, 100, 3_200), 3_000, None, Some(&[]));
        section(&mut h, 1_000, 1_200);
        h.foreign("x", 800, 300, &[0, 1]);
        assert_eq!(h.check(), vec![]);
        // A run in its section from 50 ms, its redlock stopped at 80 ms
        // with its command (the bound): its hold ends there for this
        // check; with its redlock alone stopped (its guard runs on), not.
        for (pids, want) in [(2, Vec::<&str>::new()), (1, vec!["freeze-taken"])] {
            let mut h = H::default();
            let run =
                h.run("x", Mode::Exclusive, (0, Some(50), 2_000, 2_001), None, "killed", 70, None);
            h.freeze((10, 100, 3_200), 3_000, None, Some(&[]));
            let pid = PID + u32::try_from(run).unwrap();
            h.push(Event::Nemesis {
                t: 80 * MS,
                what: "freeze".into(),
                phase: "start".into(),
                foreign: None,
                servers: Vec::new(),
                fleet: 0,
                frozen: [pid, pid + 500][..pids].to_vec(),
            });
            assert_eq!(kinds(&h.check()), want, "{pids} processes stopped");
        }
    }

    /// The negative control of `schedule-refused`: runs of another
    /// schedule than their key's record that skipped (0, the busy code
    /// under -E 0) or ran are flagged; refused (64) or unavailable (69)
    /// ones are not, and 64 is their documented refusal.
    #[test]
    fn a_run_of_another_schedule_is_refused() {
        let other = |h: &mut H, enter: Option<u64>, exit: i32| {
            let burst = Some(1);
            let op = h.run("u", Mode::Exclusive, (0, enter, 150, 160), None, "normal", exit, burst);
            h.other_schedule(op);
        };
        for (code, want) in [(64, 0), (69, 0), (0, 1), (75, 1), (3, 1)] {
            let mut h = H::default();
            other(&mut h, None, code);
            let v = h.check();
            let refused = v.iter().filter(|v| v.kind == "schedule-refused").count();
            assert_eq!(refused, want, "exit {code}: {v:#?}");
            assert!(v.iter().all(|v| v.kind != "exit-status" || code == 3), "{v:#?}");
        }
        let mut h = H::default();
        other(&mut h, Some(50), 3);
        let v = h.check();
        assert_eq!(kinds(&v), ["schedule-refused"], "{v:#?}");
        assert!(v[0].message.contains("ran its command"), "{}", v[0].message);
    }
}
