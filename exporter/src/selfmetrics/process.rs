//! `process_*`: the exporter's own footprint, read from `/proc/self` at each
//! collection under the names, help and units every Prometheus client library
//! serves. A file that cannot be read leaves its families out (logged once):
//! an unread footprint is never reported as 0.

use std::path::Path;

use tracing::warn;

use crate::metrics::{Desc, Family, Subject};

pub const CPU: Desc = Desc::counter(
    "process_cpu_seconds_total",
    "Total user and system CPU time spent in seconds.",
    "seconds",
    &[],
);
pub const OPEN_FDS: Desc = Desc::gauge(
    "process_open_fds",
    "Number of open file descriptors.",
    "",
    &[],
);
pub const MAX_FDS: Desc = Desc::gauge(
    "process_max_fds",
    "Maximum number of open file descriptors.",
    "",
    &[],
);
pub const VIRTUAL_MEMORY: Desc = Desc::gauge(
    "process_virtual_memory_bytes",
    "Virtual memory size in bytes.",
    "bytes",
    &[],
);
pub const RESIDENT_MEMORY: Desc = Desc::gauge(
    "process_resident_memory_bytes",
    "Resident memory size in bytes.",
    "bytes",
    &[],
);
pub const START_TIME: Desc = Desc::gauge(
    "process_start_time_seconds",
    "Start time of the process since unix epoch in seconds.",
    "seconds",
    &[],
);
pub const THREADS: Desc = Desc::gauge(
    "process_threads",
    "Number of OS threads in the process.",
    "",
    &[],
);

/// The fields of `/proc/<pid>/stat` the families use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    /// utime + stime, in clock ticks.
    cpu_ticks: u64,
    threads: u64,
    /// Since boot, in clock ticks.
    start_ticks: u64,
    vsize_bytes: u64,
    rss_pages: u64,
}

/// Reads the footprint of this process.
pub struct Footprint {
    root: &'static Path,
    ticks_per_second: u64,
    page_bytes: u64,
    /// Unix seconds; read once.
    start_time: Option<f64>,
    warned: bool,
}

impl Default for Footprint {
    fn default() -> Self {
        // SAFETY: sysconf takes no pointers and only reads system settings.
        let (ticks, page) = unsafe {
            (
                libc::sysconf(libc::_SC_CLK_TCK),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        Self {
            root: Path::new("/proc"),
            // -1 (unknown) or 0 leave the families that need them out.
            ticks_per_second: u64::try_from(ticks).unwrap_or(0),
            page_bytes: u64::try_from(page).unwrap_or(0),
            start_time: None,
            warned: false,
        }
    }
}

impl Footprint {
    /// The families, each with its one series; those that could not be read
    /// are left out.
    pub fn families(&mut self) -> Vec<Family> {
        let one = |desc: &Desc, v: f64| Family::of(desc).with(Subject::Node, Vec::new(), v);
        let mut out = Vec::with_capacity(7);
        let mut failed = Vec::new();
        match self.read("self/stat").and_then(|t| parse_stat(&t)) {
            Ok(stat) => {
                if let Some(tick) = std::num::NonZeroU64::new(self.ticks_per_second) {
                    // Whole seconds, as the client libraries report it.
                    out.push(one(&CPU, (stat.cpu_ticks / tick) as f64));
                    if self.start_time.is_none() {
                        self.start_time = self
                            .boot_time()
                            .map(|boot| (stat.start_ticks / tick + boot) as f64)
                            .map_err(|e| failed.push(e))
                            .ok();
                    }
                }
                out.push(one(&THREADS, stat.threads as f64));
                out.push(one(&VIRTUAL_MEMORY, stat.vsize_bytes as f64));
                if self.page_bytes > 0 {
                    let rss = stat.rss_pages.saturating_mul(self.page_bytes);
                    out.push(one(&RESIDENT_MEMORY, rss as f64));
                }
            }
            Err(e) => failed.push(e),
        }
        if let Some(start) = self.start_time {
            out.push(one(&START_TIME, start));
        }
        match std::fs::read_dir(self.root.join("self/fd")) {
            Ok(dir) => out.push(one(&OPEN_FDS, dir.count() as f64)),
            Err(e) => failed.push(format!("{}/self/fd: {e}", self.root.display())),
        }
        match self
            .read("self/limits")
            .and_then(|t| parse_max_open_files(&t))
        {
            Ok(Some(max)) => out.push(one(&MAX_FDS, max as f64)),
            Ok(None) => {} // unlimited: no number to report
            Err(e) => failed.push(e),
        }
        if !failed.is_empty() && !self.warned {
            self.warned = true;
            warn!(errors = ?failed, "process footprint partly unreadable; those process_* series are left out");
        }
        out
    }

    fn read(&self, file: &str) -> Result<String, String> {
        let path = self.root.join(file);
        std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Unix seconds of the boot (`btime` of `/proc/stat`).
    fn boot_time(&self) -> Result<u64, String> {
        let text = self.read("stat")?;
        let btime = text.lines().find_map(|l| l.strip_prefix("btime "));
        btime
            .and_then(|v| v.trim().parse().ok())
            .ok_or_else(|| format!("{}/stat: no btime line", self.root.display()))
    }
}

/// `/proc/<pid>/stat`: the fields after the command name, which is in
/// parentheses and may itself hold spaces and parentheses.
fn parse_stat(text: &str) -> Result<Stat, String> {
    let (_, after) = text
        .rsplit_once(')')
        .ok_or("stat: no command name in parentheses")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Field n of proc(5) is fields[n - 3]: the state (3) is the first.
    let field = |n: usize| -> Result<u64, String> {
        let raw = fields.get(n - 3).ok_or(format!("stat: no field {n}"))?;
        raw.parse()
            .map_err(|_| format!("stat: field {n} is not a count: {raw:?}"))
    };
    Ok(Stat {
        cpu_ticks: field(14)?.saturating_add(field(15)?),
        threads: field(20)?,
        start_ticks: field(22)?,
        vsize_bytes: field(23)?,
        rss_pages: field(24)?,
    })
}

/// The soft limit of `Max open files` in `/proc/<pid>/limits`; `None` when
/// unlimited.
fn parse_max_open_files(text: &str) -> Result<Option<u64>, String> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .ok_or("limits: no \"Max open files\" line")?;
    match line.split_whitespace().next() {
        Some("unlimited") => Ok(None),
        Some(soft) => soft
            .parse()
            .map(Some)
            .map_err(|_| format!("limits: open files soft limit is not a count: {soft:?}")),
        None => Err("limits: \"Max open files\" has no value".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_a_command_name_with_spaces_and_parentheses() {
        let text = "4242 (gpu (scale) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    250 130 0 0 20 0 17 0 123456 789012480 4321 18446744073709551615";
        let stat = parse_stat(text).expect("parses");
        assert_eq!(
            stat,
            Stat {
                cpu_ticks: 380,
                threads: 17,
                start_ticks: 123_456,
                vsize_bytes: 789_012_480,
                rss_pages: 4321,
            }
        );
        assert!(parse_stat("4242 (x) S 1 2").is_err(), "too short");
        assert!(parse_stat("no parentheses").is_err());
    }

    #[test]
    fn open_files_soft_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max processes             513266               513266               processes\n\
                      Max open files            1024                 524288               files\n";
        assert_eq!(parse_max_open_files(limits), Ok(Some(1024)));
        let unlimited =
            "Max open files            unlimited            unlimited            files\n";
        assert_eq!(parse_max_open_files(unlimited), Ok(None));
        assert!(parse_max_open_files("Max processes 1 1 processes\n").is_err());
    }

    #[test]
    fn this_process_has_every_family() {
        let families = Footprint::default().families();
        let names: Vec<&str> = families.iter().map(|f| f.name).collect();
        let limits = std::fs::read_to_string("/proc/self/limits").expect("limits");
        let limited = parse_max_open_files(&limits).expect("parses").is_some();
        assert_eq!(names.contains(&MAX_FDS.name), limited, "unlimited: none");
        for d in [
            &CPU,
            &OPEN_FDS,
            &VIRTUAL_MEMORY,
            &RESIDENT_MEMORY,
            &START_TIME,
            &THREADS,
        ] {
            assert!(names.contains(&d.name), "{} missing from {names:?}", d.name);
        }
        let rss = families.iter().find(|f| f.name == RESIDENT_MEMORY.name);
        assert!(rss.is_some_and(|f| f.samples[0].value > 1e6), "{rss:?}");
    }
}
