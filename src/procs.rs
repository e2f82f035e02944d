//! The process table, read from `/proc` without allocating: the guard
//! (`guard`) scans it in a forked child of a threaded process, where only
//! async-signal-safe calls are allowed, and the supervisor (`child`) uses
//! the same scan to find what the command left running.

/// One process, as its `/proc/PID/stat` shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proc {
    /// Its pid.
    pub pid: i32,
    /// Its parent's pid.
    pub ppid: i32,
    /// Its process group.
    pub pgrp: i32,
    /// False for a zombie (or a dead process): it runs nothing.
    pub running: bool,
}

/// Reads the text of a `/proc/PID/stat` of process `pid`. The command
/// name (field 2) may hold spaces and parentheses, so the fields are
/// counted from its last `)`.
pub fn parse_stat(pid: i32, stat: &[u8]) -> Option<Proc> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields =
        stat.get(close + 1..)?.split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty());
    let state = *fields.next()?.first()?;
    let ppid = parse_int(fields.next()?)?;
    let pgrp = parse_int(fields.next()?)?;
    Some(Proc { pid, ppid, pgrp, running: state != b'Z' && state != b'X' })
}

/// A non-negative decimal number that fits an `i32`.
fn parse_int(digits: &[u8]) -> Option<i32> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0i32, |n, &d| {
        if d.is_ascii_digit() { n.checked_mul(10)?.checked_add(i32::from(d - b'0')) } else { None }
    })
}

/// Calls `visit` for every process in `/proc`; returns false when `/proc`
/// cannot be read. Allocates nothing and makes only async-signal-safe
/// system calls (open, getdents64, read, close), so that a forked child of
/// a threaded process may call it.
pub fn scan(mut visit: impl FnMut(Proc)) -> bool {
    // SAFETY: plain system calls on descriptors this function opens and
    // closes, into buffers it owns; the dirent records are read within the
    // length getdents64 returned, through `get` (no out-of-bounds read).
    unsafe {
        let dir =
            libc::open(c"/proc".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
        if dir < 0 {
            return false;
        }
        let mut buf = [0u8; 8192];
        loop {
            let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            let mut at = 0;
            // linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name\0.
            while at + 19 < n {
                let Some(len) = buf.get(at + 16..at + 18) else { break };
                let reclen = usize::from(u16::from_ne_bytes([len[0], len[1]]));
                let Some(record) = buf.get(at + 19..(at + reclen).min(n)) else { break };
                let name = record.split(|&b| b == 0).next().unwrap_or(&[]);
                if let Some(pid) = parse_int(name)
                    && let Some(proc) = read_stat(pid, name)
                {
                    visit(proc);
                }
                if reclen == 0 {
                    break;
                }
                at += reclen;
            }
        }
        libc::close(dir);
        true
    }
}

/// Process `pid` as its `/proc/PID/stat` shows it now.
pub fn stat(pid: i32) -> Option<Proc> {
    let mut digits = [0u8; 12];
    let mut n = pid;
    let mut at = digits.len();
    loop {
        at = at.checked_sub(1)?;
        *digits.get_mut(at)? = b'0' + u8::try_from(n % 10).ok()?;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    read_stat(pid, digits.get(at..)?)
}

/// Reads `/proc/PID/stat` (`digits` is PID as text) into a stack buffer.
fn read_stat(pid: i32, digits: &[u8]) -> Option<Proc> {
    let mut path = [0u8; 32];
    let parts: [&[u8]; 3] = [b"/proc/", digits, b"/stat\0"];
    let mut len = 0;
    for part in parts {
        path.get_mut(len..len + part.len())?.copy_from_slice(part);
        len += part.len();
    }
    let mut stat = [0u8; 1024];
    // SAFETY: `path` is NUL-terminated (the last part ends with \0); the
    // read is bounded by the buffer's length; the fd is closed here.
    let n = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, stat.as_mut_ptr().cast(), stat.len());
        libc::close(fd);
        n
    };
    parse_stat(pid, stat.get(..usize::try_from(n).ok()?)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_parent_group_and_state() {
        let stat = |name: &str, state: &str| {
            format!("4242 ({name}) {state} 12 77 77 0 -1 4194560 97 0 0 0")
        };
        let p = |running| Some(Proc { pid: 4242, ppid: 12, pgrp: 77, running });
        assert_eq!(parse_stat(4242, stat("sleep", "S").as_bytes()), p(true));
        assert_eq!(parse_stat(4242, stat("a) R 1 5 (b", "R").as_bytes()), p(true));
        assert_eq!(parse_stat(4242, stat("sleep", "Z").as_bytes()), p(false));
        assert_eq!(parse_stat(4242, b""), None);
        assert_eq!(parse_int(b"99999999999"), None);
    }

    #[test]
    fn the_scan_finds_this_process_and_its_parent() {
        let me = i32::try_from(std::process::id()).unwrap();
        let mut found = None;
        assert!(scan(|p| {
            if p.pid == me {
                found = Some(p);
            }
        }));
        // SAFETY: getppid and getpgrp have no preconditions.
        let (ppid, pgrp) = unsafe { (libc::getppid(), libc::getpgrp()) };
        assert_eq!(found, Some(Proc { pid: me, ppid, pgrp, running: true }));
    }
}
