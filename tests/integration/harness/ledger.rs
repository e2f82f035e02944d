//! A ledger for critical sections with more than one holder (`--limit`,
//! `--shared`): each holder writes a line on entry and exit, and the audit
//! replays them in time order.

use std::collections::BTreeMap;
use std::path::Path;

/// A critical section for `--limit`: a ledger line on entry and exit with
/// the place held, and a mkdir per place that fails if two holders share
/// one. A SIGTERM (a lost place) still writes the exit line.
pub fn section(dir: &Path, pause: &str) -> String {
    let d = dir.display();
    format!(
        "trap 'rmdir {d}/inside-$REDLOCK_SLOT 2>/dev/null; echo \"exit $REDLOCK_SLOT $(date +%s%N)\" >> {d}/ledger; exit 143' TERM; \
         echo \"enter $REDLOCK_SLOT $(date +%s%N)\" >> {d}/ledger; \
         mkdir {d}/inside-$REDLOCK_SLOT 2>/dev/null || echo overlap >> {d}/overlaps; \
         sleep {pause}; rmdir {d}/inside-$REDLOCK_SLOT; \
         echo \"exit $REDLOCK_SLOT $(date +%s%N)\" >> {d}/ledger"
    )
}

/// Reads a ledger: the most holders inside at once and the number of
/// complete sections. Panics when two holders shared a place.
pub fn audit(dir: &Path) -> (usize, usize) {
    let overlaps = std::fs::read_to_string(dir.join("overlaps")).unwrap_or_default();
    assert!(overlaps.is_empty(), "two holders shared a place {} time(s)", overlaps.lines().count());
    let ledger = std::fs::read_to_string(dir.join("ledger")).unwrap_or_default();
    let mut events: Vec<(u128, bool, String)> = ledger
        .lines()
        .map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            (p[2].parse().unwrap(), p[0] == "enter", p[1].to_owned())
        })
        .collect();
    // At equal times an exit sorts before an entry (false < true).
    events.sort();
    let (mut inside, mut most, mut sections) = (BTreeMap::<String, usize>::new(), 0, 0);
    for (t, enter, slot) in &events {
        if *enter {
            *inside.entry(slot.clone()).or_default() += 1;
            assert_eq!(inside[slot], 1, "place {slot} entered twice at {t}");
        } else {
            let n = inside.get_mut(slot).unwrap_or_else(|| panic!("exit of {slot} without entry"));
            *n -= 1;
            sections += 1;
        }
        most = most.max(inside.values().sum());
    }
    (most, sections)
}

/// A critical section for `--shared`: `mode` is `shared` or `exclusive`;
/// a ledger line on entry and exit, also when stopped by SIGTERM.
pub fn rw_section(dir: &Path, mode: &str, pause: &str) -> String {
    let d = dir.display();
    format!(
        "trap 'echo \"exit {mode} $(date +%s%N)\" >> {d}/ledger; exit 143' TERM; \
         echo \"enter {mode} $(date +%s%N)\" >> {d}/ledger; sleep {pause}; \
         echo \"exit {mode} $(date +%s%N)\" >> {d}/ledger"
    )
}

/// What a `--shared` ledger shows.
#[derive(Debug, Default)]
pub struct RwAudit {
    /// The most shared holders inside at once.
    pub most_shared: usize,
    /// Complete shared sections.
    pub shared: usize,
    /// Complete exclusive sections.
    pub exclusive: usize,
}

/// Reads a `--shared` ledger; panics when an exclusive holder was inside
/// with anyone else.
pub fn rw_audit(dir: &Path) -> RwAudit {
    let ledger = std::fs::read_to_string(dir.join("ledger")).unwrap_or_default();
    let mut events: Vec<(u128, bool, String)> = ledger
        .lines()
        .map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            (p[2].parse().unwrap(), p[0] == "enter", p[1].to_owned())
        })
        .collect();
    events.sort();
    let (mut shared, mut exclusive) = (0usize, 0usize);
    let mut audit = RwAudit::default();
    for (t, enter, mode) in &events {
        match (enter, mode.as_str()) {
            (true, "shared") => shared += 1,
            (true, _) => exclusive += 1,
            (false, "shared") => {
                shared -= 1;
                audit.shared += 1;
            }
            (false, _) => {
                exclusive -= 1;
                audit.exclusive += 1;
            }
        }
        assert!(
            exclusive == 0 || (exclusive == 1 && shared == 0),
            "at {t}: {exclusive} exclusive and {shared} shared holders inside"
        );
        audit.most_shared = audit.most_shared.max(shared);
    }
    audit
}
